package wire

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Errors of a delivery that cannot be made. The first two are the
// publisher's or the subscriber's doing, not the queue's: the message is
// dropped (or dead-lettered), as AWS drops it, and the publish itself has
// succeeded.
var (
	// ErrTooManyAttributes: a raw delivery to SQS carries at most
	// MaxRawAttributes message attributes; AWS discards a message with more
	// as a client-side error.
	ErrTooManyAttributes = errors.New("sns/wire: more than 10 message attributes for a raw delivery to SQS")
	// ErrFIFOQueueOnStandardTopic: a FIFO queue cannot receive from a
	// standard topic (Subscribe refuses the pair).
	ErrFIFOQueueOnStandardTopic = errors.New("sns/wire: a FIFO queue cannot receive from a standard topic")
	// ErrSignatureVersion: a topic's SignatureVersion is neither "1" nor
	// "2" (a stored attribute that validation should have refused).
	ErrSignatureVersion = errors.New("sns/wire: unknown signature version")
)

// Notification is one message as the topic accepted it, for delivery to
// each subscription.
type Notification struct {
	MessageID string
	TopicARN  string
	// Subject is "" when the publish had none.
	Subject string
	// Message is the message as published; with MessageStructure "json"
	// it is the JSON object whose "sqs" or "default" member is delivered.
	Message          string
	MessageStructure string
	Attributes       map[string]MessageAttribute
	// Timestamp is when SNS accepted the message; the envelope shows it in
	// UTC with milliseconds.
	Timestamp time.Time
	// SequenceNumber, for FIFO topics only, is the message's place in its
	// group.
	SequenceNumber string
	// GroupID and DedupID are the publish's MessageGroupId and
	// MessageDeduplicationId ("" when absent).
	GroupID string
	DedupID string
	// Topic is the topic's settings when the message was published.
	Topic TopicSettings
}

// Target is a subscription as delivery needs it.
type Target struct {
	SubscriptionARN string
	// Endpoint is the queue's ARN; a name ending ".fifo" is a FIFO queue.
	Endpoint string
	// Raw is the RawMessageDelivery attribute.
	Raw bool
}

// Signer signs the notifications of standard topics, as SNS signs them
// so subscribers can check they come from SNS.
type Signer interface {
	// Sign signs canonical, the string SNS signs, with the algorithm of
	// the signature version ("1": SHA1withRSA, "2": SHA256withRSA), and
	// returns the base64 signature and the URL of the certificate that
	// verifies it.
	Sign(version, canonical string) (signature, certURL string, err error)
}

// RSASigner is the Signer of a private key whose certificate is served
// at a URL.
type RSASigner struct {
	key     *rsa.PrivateKey
	certURL string
}

// NewRSASigner returns the signer of key, whose certificate is at
// certURL (the envelope's SigningCertURL).
func NewRSASigner(key *rsa.PrivateKey, certURL string) *RSASigner {
	return &RSASigner{key: key, certURL: certURL}
}

// Sign implements Signer with RSASSA-PKCS1-v1_5.
func (s *RSASigner) Sign(version, canonical string) (string, string, error) {
	var h crypto.Hash
	var sum []byte
	switch version {
	case "1":
		d := sha1.Sum([]byte(canonical))
		h, sum = crypto.SHA1, d[:]
	case "2":
		d := sha256.Sum256([]byte(canonical))
		h, sum = crypto.SHA256, d[:]
	default:
		return "", "", ErrSignatureVersion
	}
	sig, err := rsa.SignPKCS1v15(nil, s.key, h, sum)
	if err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(sig), s.certURL, nil
}

// Deliverer turns notifications into SQS messages. The zero value is
// usable: it writes no signature and an UnsubscribeURL on an empty base.
type Deliverer struct {
	// UnsubscribeURL is the base of the envelopes' UnsubscribeURL, such as
	// "https://sns.us-east-1.amazonaws.com/"; the envelope appends
	// "?Action=Unsubscribe&SubscriptionArn=<arn>".
	UnsubscribeURL string
	// Signer signs the envelopes of standard topics. Nil leaves out
	// SignatureVersion, Signature and SigningCertURL.
	Signer Signer
}

// Prepare computes what the messages of n to every subscription share:
// the delivered content and, when an envelope is first asked for, the
// envelope's head with its signature (RSA signing costs about a
// millisecond, and the signature does not depend on the subscription).
// The result is safe for concurrent use.
func (d Deliverer) Prepare(n Notification) (*Prepared, error) {
	content, err := n.content("sqs")
	if err != nil {
		return nil, err
	}
	p := &Prepared{d: d, n: n, content: content, dedupID: n.DedupID}
	if p.dedupID == "" && n.Topic.FIFO && n.Topic.ContentBasedDeduplication {
		sum := sha256.Sum256([]byte(n.Message))
		p.dedupID = hex.EncodeToString(sum[:])
	}
	return p, nil
}

// Prepared is one notification ready for delivery to each subscription.
type Prepared struct {
	d       Deliverer
	n       Notification
	content string // the "sqs" or "default" member of a JSON-structured message
	dedupID string // for FIFO queues: the publish's, or the content-based one

	once       sync.Once
	head, tail []byte // the envelope around its UnsubscribeURL
	err        error
}

// SQSMessage is n's message for one subscription (Prepare, then
// Prepared.SQSMessage); to deliver n to several, Prepare it once.
func (d Deliverer) SQSMessage(n Notification, t Target) (st.SendInput, error) {
	p, err := d.Prepare(n)
	if err != nil {
		return st.SendInput{}, err
	}
	return p.SQSMessage(t)
}

// Envelope is n's envelope for one subscription (see Prepared.Envelope).
func (d Deliverer) Envelope(n Notification, subscriptionARN string) (string, error) {
	p, err := d.Prepare(n)
	if err != nil {
		return "", err
	}
	return p.Envelope(subscriptionARN)
}

// SQSMessage is what lands in the subscription's queue: the envelope, or
// with raw delivery the message itself with its attributes as SQS
// message attributes, and the group and deduplication ids:
//
//   - FIFO topic to FIFO queue: MessageGroupId is the publish's, the
//     deduplication id the publish's or, with ContentBasedDeduplication,
//     the lowercase hex SHA-256 of the Message;
//   - FIFO topic to standard queue: neither (the topic deduplicated);
//   - standard topic to standard queue: the publish's MessageGroupId, if
//     any (SQS fair queues);
//   - standard topic to FIFO queue: ErrFIFOQueueOnStandardTopic.
//
// A raw delivery with more than MaxRawAttributes attributes is
// ErrTooManyAttributes. SenderID and the trace fields are the caller's.
func (p *Prepared) SQSMessage(t Target) (st.SendInput, error) {
	var in st.SendInput
	n := &p.n
	queueFIFO := IsFIFOQueueARN(t.Endpoint)
	switch {
	case queueFIFO && !n.Topic.FIFO:
		return in, ErrFIFOQueueOnStandardTopic
	case queueFIFO:
		in.GroupID, in.DedupID = n.GroupID, p.dedupID
	case !n.Topic.FIFO:
		in.GroupID = n.GroupID
	}
	if !t.Raw {
		var err error
		in.Body, err = p.Envelope(t.SubscriptionARN)
		return in, err
	}
	in.Body = p.content
	// Attributes go with a plain message only, not a JSON-structured one.
	if n.MessageStructure == "json" || len(n.Attributes) == 0 {
		return in, nil
	}
	if len(n.Attributes) > MaxRawAttributes {
		return in, ErrTooManyAttributes
	}
	in.Attributes = SQSAttributes(n.Attributes)
	return in, nil
}

// SQSAttributes maps SNS message attributes onto SQS ones, type for type:
// Number stays Number, Binary stays bytes, custom String.x types are
// kept. The result shares no memory with attrs.
func SQSAttributes(attrs map[string]MessageAttribute) map[string]st.AttributeValue {
	out := make(map[string]st.AttributeValue, len(attrs))
	for name, a := range attrs {
		v := st.AttributeValue{DataType: a.DataType}
		if strings.HasPrefix(a.DataType, "Binary") {
			v.BinaryValue = append([]byte{}, a.BinaryValue...)
		} else if a.StringValue != nil {
			s := *a.StringValue
			v.StringValue = &s
		}
		out[name] = v
	}
	return out
}

// content is the message a protocol receives: the protocol's member of a
// JSON-structured message if it is a string, else its "default".
func (n Notification) content(protocol string) (string, error) {
	if n.MessageStructure != "json" {
		return n.Message, nil
	}
	obj, err := structured(n.Message)
	if err != nil {
		return "", err
	}
	if s, ok := stringMember(obj, protocol); ok {
		return s, nil
	}
	if s, ok := stringMember(obj, "default"); ok {
		return s, nil
	}
	return "", errors.New("sns/wire: no default entry in a JSON-structured message")
}

// timestamp is the envelope's Timestamp: ISO 8601 in UTC with
// milliseconds.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// CanonicalString is the string SNS signs for a notification: Message,
// MessageId, Subject (when there is one), Timestamp, TopicArn and Type,
// each as "name\nvalue\n", in that order. message is the delivered
// message (the "sqs" or "default" member of a JSON-structured one).
func (n Notification) CanonicalString(message string) string {
	var b strings.Builder
	pair := func(k, v string) {
		b.WriteString(k + "\n" + v + "\n")
	}
	pair("Message", message)
	pair("MessageId", n.MessageID)
	if n.Subject != "" {
		pair("Subject", n.Subject)
	}
	pair("Timestamp", timestamp(n.Timestamp))
	pair("TopicArn", n.TopicARN)
	pair("Type", "Notification")
	return b.String()
}

// Envelope is the JSON notification an SQS subscription without raw
// delivery receives, byte for byte as AWS writes it: pretty-printed with
// two spaces and " : ", keys in AWS's order,
//
//	Type, MessageId, [SequenceNumber], TopicArn, [Subject], Message, Timestamp,
//	[SignatureVersion, Signature, SigningCertURL], UnsubscribeURL, [MessageAttributes]
//
// SequenceNumber for FIFO topics only; the signature fields for standard
// topics with a Signer; MessageAttributes only when there are some, each
// on one line as {"Type":"<DataType>","Value":"<value>"} (binary values in
// base64), in name order. Strings are escaped as AWS's JSON writer
// escapes them: quote, backslash and control characters only, so "<",
// "&", "/" and non-ASCII text stay as they are.
func (p *Prepared) Envelope(subscriptionARN string) (string, error) {
	p.once.Do(p.envelope)
	if p.err != nil {
		return "", p.err
	}
	u := unsubscribeURL(p.d.UnsubscribeURL, subscriptionARN)
	b := make([]byte, 0, len(p.head)+len(u)+len(p.tail)+32)
	b = append(b, p.head...)
	b = append(b, ",\n  \"UnsubscribeURL\" : "...)
	b = appendJSONString(b, u)
	b = append(b, p.tail...)
	return string(b), nil
}

// envelope builds the envelope's head (up to the UnsubscribeURL) and its
// tail (the attributes and the closing brace).
func (p *Prepared) envelope() {
	n := &p.n
	b := make([]byte, 0, len(p.content)+512)
	field := func(k, v string) {
		if len(b) > 2 {
			b = append(b, ',', '\n')
		}
		b = append(b, "  "...)
		b = appendJSONString(b, k)
		b = append(b, " : "...)
		b = appendJSONString(b, v)
	}
	b = append(b, "{\n"...)
	field("Type", "Notification")
	field("MessageId", n.MessageID)
	if n.Topic.FIFO {
		field("SequenceNumber", n.SequenceNumber)
	}
	field("TopicArn", n.TopicARN)
	if n.Subject != "" {
		field("Subject", n.Subject)
	}
	field("Message", p.content)
	field("Timestamp", timestamp(n.Timestamp))
	if !n.Topic.FIFO && p.d.Signer != nil {
		version := n.Topic.SignatureVersion
		if version == "" {
			version = "1"
		}
		sig, certURL, err := p.d.Signer.Sign(version, n.CanonicalString(p.content))
		if err != nil {
			p.err = err
			return
		}
		field("SignatureVersion", version)
		field("Signature", sig)
		field("SigningCertURL", certURL)
	}
	p.head = b

	var t []byte
	if len(n.Attributes) > 0 {
		t = append(t, ",\n  \"MessageAttributes\" : {\n"...)
		for i, name := range sortedKeys(n.Attributes) {
			if i > 0 {
				t = append(t, ',', '\n')
			}
			a := n.Attributes[name]
			value := ""
			if strings.HasPrefix(a.DataType, "Binary") {
				value = base64.StdEncoding.EncodeToString(a.BinaryValue)
			} else if a.StringValue != nil {
				value = *a.StringValue
			}
			t = append(t, "    "...)
			t = appendJSONString(t, name)
			t = append(t, ` : {"Type":`...)
			t = appendJSONString(t, a.DataType)
			t = append(t, `,"Value":`...)
			t = appendJSONString(t, value)
			t = append(t, '}')
		}
		t = append(t, "\n  }"...)
	}
	p.tail = append(t, "\n}"...)
}

// unsubscribeURL is base?Action=Unsubscribe&SubscriptionArn=arn, the ARN
// unescaped, as AWS writes it.
func unsubscribeURL(base, subscriptionARN string) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "Action=Unsubscribe&SubscriptionArn=" + subscriptionARN
}

// appendJSONString appends s as a JSON string the way AWS's writer
// (Jackson) does: '"' and '\' escaped, control characters as \b \t \n \f
// \r or \u00XX (upper-case hex), everything else, HTML characters and
// U+2028 included, as is. Invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}
