package wire

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	st "github.com/sluicemq/sluice/sluicetype"
)

// fakeSigner signs with a fixed text, so envelopes are reproducible.
type fakeSigner struct{}

func (fakeSigner) Sign(version, canonical string) (string, string, error) {
	return "SIG" + version + "/" + base64.StdEncoding.EncodeToString([]byte(canonical[:7])),
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123456789abcdef0123456789abcdef.pem", nil
}

var deliverer = Deliverer{UnsubscribeURL: "https://sns.us-east-1.amazonaws.com/", Signer: fakeSigner{}}

var published = time.Date(2021, 2, 16, 21, 41, 19, 978_654_321, time.FixedZone("CET", 3600))

func notification() Notification {
	return Notification{
		MessageID: "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
		TopicARN:  topicARN,
		Message:   "hello",
		Timestamp: published,
	}
}

// envelopeKeys is the envelope's keys in the order they are written.
func envelopeKeys(t *testing.T, body string) []string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(body))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v %v", tok, err)
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestEnvelopeGolden(t *testing.T) {
	full := notification()
	full.Subject = "Greetings <&>"
	full.Message = "line1\nline2\t\"quoted\" \\ </script> & é 𝄞 \u2028 \x01 \x7f"
	full.Attributes = map[string]MessageAttribute{
		"str":    strAttr("String", "v<&>"),
		"num":    strAttr("Number", "99.12"),
		"bin":    {DataType: "Binary", BinaryValue: []byte{2, 3, 4}},
		"arr":    strAttr("String.Array", `["a","b"]`),
		"custom": strAttr("String.custom", "c"),
	}

	fifo := notification()
	fifo.TopicARN = topicARN + ".fifo"
	fifo.SequenceNumber = "10000000000000003000"
	fifo.Topic = TopicSettings{FIFO: true}
	fifo.Subject = "s"

	jsonStructured := notification()
	jsonStructured.MessageStructure = "json"
	jsonStructured.Message = `{"default":"for everyone","sqs":"for queues","email":"for mail"}`
	jsonStructured.Topic.SignatureVersion = "2"

	tests := []struct {
		name     string
		d        Deliverer
		n        Notification
		keys     []string
		message  string
		unsigned bool
	}{
		{"standard", deliverer, notification(),
			[]string{"Type", "MessageId", "TopicArn", "Message", "Timestamp", "SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL"},
			"hello", false},
		{"standard_full", deliverer, full,
			[]string{"Type", "MessageId", "TopicArn", "Subject", "Message", "Timestamp", "SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL", "MessageAttributes"},
			full.Message, false},
		{"fifo", deliverer, fifo,
			[]string{"Type", "MessageId", "SequenceNumber", "TopicArn", "Subject", "Message", "Timestamp", "UnsubscribeURL"},
			"hello", true},
		{"unsigned", Deliverer{UnsubscribeURL: "http://localhost:9324/?Version=2010-03-31"}, notification(),
			[]string{"Type", "MessageId", "TopicArn", "Message", "Timestamp", "UnsubscribeURL"},
			"hello", true},
		{"json_structure", deliverer, jsonStructured,
			[]string{"Type", "MessageId", "TopicArn", "Message", "Timestamp", "SignatureVersion", "Signature", "SigningCertURL", "UnsubscribeURL"},
			"for queues", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := tt.d.Envelope(tt.n, subARN)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "envelope_"+tt.name+".json", []byte(body))
			if got := envelopeKeys(t, body); !reflect.DeepEqual(got, tt.keys) {
				t.Errorf("keys\n got %q\nwant %q", got, tt.keys)
			}
			if !strings.HasPrefix(body, "{\n  \"Type\" : \"Notification\",\n  \"MessageId\" : ") || !strings.HasSuffix(body, "\n}") {
				t.Errorf("not AWS's pretty printing:\n%s", body)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatalf("invalid JSON: %v\n%s", err, body)
			}
			if m["Message"] != tt.message {
				t.Errorf("Message = %q, want %q", m["Message"], tt.message)
			}
			if m["Timestamp"] != "2021-02-16T20:41:19.978Z" {
				t.Errorf("Timestamp = %q", m["Timestamp"])
			}
			if m["UnsubscribeURL"] != unsubscribeURL(tt.d.UnsubscribeURL, subARN) {
				t.Errorf("UnsubscribeURL = %q", m["UnsubscribeURL"])
			}
			if _, signed := m["Signature"]; signed == tt.unsigned {
				t.Errorf("signed = %v", signed)
			}
		})
	}

	// The attributes as AWS writes them: one line each, Type then Value,
	// binary in base64.
	body, _ := deliverer.Envelope(full, subARN)
	for _, line := range []string{
		`    "bin" : {"Type":"Binary","Value":"AgME"},`,
		`    "num" : {"Type":"Number","Value":"99.12"},`,
		`    "str" : {"Type":"String","Value":"v<&>"}` + "\n  }\n}",
		`"Subject" : "Greetings <&>"`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("envelope lacks %q:\n%s", line, body)
		}
	}
	// Only quote, backslash and control characters are escaped (Jackson's
	// default), upper-case hex.
	if want := `"Message" : "line1\nline2\t\"quoted\" \\ </script> & é 𝄞 ` + "\u2028" + ` \u0001 ` + "\x7f" + `"`; !strings.Contains(body, want) {
		t.Errorf("Message escaped differently:\n%s\nwant %s", body, want)
	}
}

func TestUnsubscribeURL(t *testing.T) {
	if got := unsubscribeURL("https://sns.us-east-1.amazonaws.com/", subARN); got != "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn="+subARN {
		t.Errorf("= %q", got)
	}
	if got := unsubscribeURL("http://h/?a=b", "s"); got != "http://h/?a=b&Action=Unsubscribe&SubscriptionArn=s" {
		t.Errorf("= %q", got)
	}
}

// TestSignatureVerifies signs with a real key and checks the signature
// the way a subscriber does (AWS's guide: rebuild the string to sign from
// the received fields, verify with the certificate's public key).
func TestSignatureVerifies(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const certURL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem"
	d := Deliverer{UnsubscribeURL: "https://sns.us-east-1.amazonaws.com/", Signer: NewRSASigner(key, certURL)}
	for _, tt := range []struct {
		version string
		subject string
		hash    crypto.Hash
	}{
		{"", "", crypto.SHA1}, {"1", "subj", crypto.SHA1}, {"2", "", crypto.SHA256}, {"2", "subj", crypto.SHA256},
	} {
		t.Run(tt.version+tt.subject, func(t *testing.T) {
			n := notification()
			n.Subject = tt.subject
			n.Message = "multi\nline \"message\" é"
			n.Topic.SignatureVersion = tt.version
			body, err := d.Envelope(n, subARN)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]string
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatal(err)
			}
			want := tt.version
			if want == "" {
				want = "1"
			}
			if m["SignatureVersion"] != want || m["SigningCertURL"] != certURL {
				t.Errorf("SignatureVersion %q, SigningCertURL %q", m["SignatureVersion"], m["SigningCertURL"])
			}
			var toSign strings.Builder
			for _, k := range []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"} {
				if v, ok := m[k]; ok {
					toSign.WriteString(k + "\n" + v + "\n")
				}
			}
			sig, err := base64.StdEncoding.DecodeString(m["Signature"])
			if err != nil {
				t.Fatal(err)
			}
			var digest []byte
			if tt.hash == crypto.SHA1 {
				s := sha1.Sum([]byte(toSign.String()))
				digest = s[:]
			} else {
				s := sha256.Sum256([]byte(toSign.String()))
				digest = s[:]
			}
			if err := rsa.VerifyPKCS1v15(&key.PublicKey, tt.hash, digest, sig); err != nil {
				t.Errorf("signature does not verify: %v", err)
			}
			if got := n.CanonicalString(n.Message); got != toSign.String() {
				t.Errorf("CanonicalString\n got %q\nwant %q", got, toSign.String())
			}
		})
	}
	if _, _, err := NewRSASigner(key, certURL).Sign("3", "x"); !errors.Is(err, ErrSignatureVersion) {
		t.Errorf("version 3: %v", err)
	}
	n := notification()
	n.Topic.SignatureVersion = "3"
	if _, err := d.Envelope(n, subARN); !errors.Is(err, ErrSignatureVersion) {
		t.Errorf("envelope with version 3: %v", err)
	}
}

func TestRawDelivery(t *testing.T) {
	n := notification()
	n.Subject = "dropped"
	n.Attributes = map[string]MessageAttribute{
		"attr1":  strAttr("Number", "99.12"),
		"bin":    {DataType: "Binary", BinaryValue: []byte{2, 3, 4}},
		"custom": strAttr("String.custom", "c"),
		"arr":    strAttr("String.Array", `["a"]`),
	}
	got, err := deliverer.SQSMessage(n, Target{SubscriptionARN: subARN, Endpoint: queueARN, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	want := st.SendInput{Body: "hello", Attributes: map[string]st.AttributeValue{
		"attr1":  {DataType: "Number", StringValue: ptr("99.12")},
		"bin":    {DataType: "Binary", BinaryValue: []byte{2, 3, 4}},
		"custom": {DataType: "String.custom", StringValue: ptr("c")},
		"arr":    {DataType: "String.Array", StringValue: ptr(`["a"]`)},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("raw delivery\n got %#v\nwant %#v", got, want)
	}
	// The mapping copies: the SQS message shares nothing with the publish.
	got.Attributes["bin"].BinaryValue[0] = 9
	*got.Attributes["attr1"].StringValue = "x"
	if n.Attributes["bin"].BinaryValue[0] != 2 || *n.Attributes["attr1"].StringValue != "99.12" {
		t.Error("SQSAttributes shares memory with the notification")
	}

	// A JSON-structured message: the sqs member, or default, and no
	// attributes.
	js := n
	js.MessageStructure = "json"
	js.Message = `{"default":"d","sqs":{"not":"a string"}}`
	got, err = deliverer.SQSMessage(js, Target{Endpoint: queueARN, Raw: true})
	if err != nil || got.Body != "d" || got.Attributes != nil {
		t.Errorf("json structure: %#v, %v", got, err)
	}

	// Ten attributes pass, eleven are the publisher's error.
	many := notification()
	many.Attributes = map[string]MessageAttribute{}
	for i := range MaxRawAttributes {
		many.Attributes[fmt.Sprint("a", i)] = strAttr("String", "v")
	}
	if got, err := deliverer.SQSMessage(many, Target{Endpoint: queueARN, Raw: true}); err != nil || len(got.Attributes) != 10 {
		t.Errorf("10 attributes: %d, %v", len(got.Attributes), err)
	}
	many.Attributes["a10"] = strAttr("String", "v")
	if _, err := deliverer.SQSMessage(many, Target{Endpoint: queueARN, Raw: true}); !errors.Is(err, ErrTooManyAttributes) {
		t.Errorf("11 attributes: %v", err)
	}
	// An envelope carries any number, inside the body.
	env, err := deliverer.SQSMessage(many, Target{SubscriptionARN: subARN, Endpoint: queueARN})
	if err != nil || env.Attributes != nil || !strings.Contains(env.Body, `"a10" : {"Type":"String","Value":"v"}`) {
		t.Errorf("envelope with 11 attributes: %#v, %v", env, err)
	}
}

func TestDeliveryGroupsAndDedup(t *testing.T) {
	const fifoQueue = "arn:aws:sqs:us-east-1:000000000000:q1.fifo"
	fifo := notification()
	fifo.TopicARN += ".fifo"
	fifo.Message = "Test"
	fifo.SequenceNumber = "10000000000000003000"
	fifo.GroupID = "g1"
	fifo.Topic = TopicSettings{FIFO: true}

	explicit := fifo
	explicit.DedupID = "d1"
	cbd := fifo
	cbd.Topic.ContentBasedDeduplication = true
	cbdExplicit := cbd
	cbdExplicit.DedupID = "d2"
	std := notification()
	std.GroupID = "tenant-a"

	tests := []struct {
		name          string
		n             Notification
		endpoint      string
		raw           bool
		group, dedup  string
		envelopeCheck func(body string) bool
	}{
		{"fifo to fifo, explicit dedup", explicit, fifoQueue, false, "g1", "d1", nil},
		// AWS gave 532eaabd…5e25 for "Test": the lowercase hex SHA-256.
		{"fifo to fifo, content-based", cbd, fifoQueue, true, "g1", "532eaabd9574880dbf76b9b8cc00832c20a6ec113d682299550d7a6e0f345e25", nil},
		{"fifo to fifo, explicit wins", cbdExplicit, fifoQueue, false, "g1", "d2", nil},
		{"fifo to standard", cbd, queueARN, false, "", "", func(body string) bool {
			return strings.Contains(body, `"SequenceNumber" : "10000000000000003000"`) && !strings.Contains(body, "Signature")
		}},
		{"standard with group to standard", std, queueARN, false, "tenant-a", "", func(body string) bool {
			return !strings.Contains(body, "tenant-a") && strings.Contains(body, `"Signature"`)
		}},
		{"standard to standard", notification(), queueARN, true, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := deliverer.SQSMessage(tt.n, Target{SubscriptionARN: subARN, Endpoint: tt.endpoint, Raw: tt.raw})
			if err != nil {
				t.Fatal(err)
			}
			if got.GroupID != tt.group || got.DedupID != tt.dedup {
				t.Errorf("group %q dedup %q, want %q %q", got.GroupID, got.DedupID, tt.group, tt.dedup)
			}
			if tt.raw && got.Body != tt.n.Message {
				t.Errorf("raw body %q", got.Body)
			}
			if tt.envelopeCheck != nil && !tt.envelopeCheck(got.Body) {
				t.Errorf("envelope:\n%s", got.Body)
			}
		})
	}
	if _, err := deliverer.SQSMessage(notification(), Target{Endpoint: fifoQueue}); !errors.Is(err, ErrFIFOQueueOnStandardTopic) {
		t.Errorf("standard topic to FIFO queue: %v", err)
	}
}

func TestAppendJSONString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{"\"\\/", `"\"\\/"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x1f", `"\u0000\u001F"`},
		{"<>&", `"<>&"`},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"a\xffb", "\"a\uFFFDb\""},
		{"é𝄞", `"é𝄞"`},
	}
	for _, tt := range tests {
		got := string(appendJSONString(nil, tt.in))
		if got != tt.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tt.in, got, tt.want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%s: %v", got, err)
		} else if !bytes.Equal([]byte(back), []byte(strings.ToValidUTF8(tt.in, "\uFFFD"))) {
			t.Errorf("round trip of %q: %q", tt.in, back)
		}
	}
}

// countingSigner counts signatures.
type countingSigner struct{ n atomic.Int32 }

func (c *countingSigner) Sign(version, canonical string) (string, string, error) {
	c.n.Add(1)
	return fakeSigner{}.Sign(version, canonical)
}

// TestPrepared: a notification prepared once delivers to many
// subscriptions, concurrently, with one signature, each envelope naming
// its own subscription and otherwise the same as Envelope's.
func TestPrepared(t *testing.T) {
	signer := &countingSigner{}
	d := Deliverer{UnsubscribeURL: "https://sns.us-east-1.amazonaws.com/", Signer: signer}
	n := notification()
	n.Attributes = map[string]MessageAttribute{"a": strAttr("String", "v")}
	p, err := d.Prepare(n)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Go(func() {
			m, err := p.SQSMessage(Target{SubscriptionARN: fmt.Sprint(topicARN, ":sub", i), Endpoint: queueARN})
			if err != nil {
				t.Error(err)
			}
			bodies[i] = m.Body
		})
	}
	wg.Wait()
	if got := signer.n.Load(); got != 1 {
		t.Errorf("signed %d times, want once", got)
	}
	for i, body := range bodies {
		want, err := deliverer.Envelope(n, fmt.Sprint(topicARN, ":sub", i))
		if err != nil || body != want {
			t.Errorf("envelope %d\n got %s\nwant %s (%v)", i, body, want, err)
		}
	}
	// A raw delivery needs no signature.
	raw := &countingSigner{}
	p, _ = Deliverer{Signer: raw}.Prepare(n)
	if _, err := p.SQSMessage(Target{Endpoint: queueARN, Raw: true}); err != nil || raw.n.Load() != 0 {
		t.Errorf("raw delivery signed %d times, %v", raw.n.Load(), err)
	}
	// A JSON-structured message without a default is refused up front.
	bad := notification()
	bad.MessageStructure = "json"
	bad.Message = `{"sqs":1}`
	if _, err := d.Prepare(bad); err == nil {
		t.Error("Prepare accepted a structured message without default")
	}
}
