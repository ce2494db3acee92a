package sqs

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sqs/intake"
	"github.com/sluicemq/sluice/internal/sqs/wire"
)

func TestQueryDecode(t *testing.T) {
	form := "Action=SendMessageBatch&QueueUrl=http%3A%2F%2Fh%2F000000000000%2Fq" +
		"&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=hi" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=s&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=v" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.2.Name=l&SendMessageBatchRequestEntry.1.MessageAttribute.2.Value.DataType=String" +
		"&SendMessageBatchRequestEntry.1.MessageAttribute.2.Value.StringListValue.1=x&SendMessageBatchRequestEntry.1.MessageAttribute.2.Value.StringListValue.2=y" +
		"&SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=there&SendMessageBatchRequestEntry.2.DelaySeconds=5" +
		"&AttributeName.1=All&MessageAttributeName=Foo&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=10&Tag.1.Key=k&Tag.1.Value=v"
	vals, _ := url.ParseQuery(form)
	p := wire.DecodeQuery(vals)
	es, err := p.Entries("Entries")
	if err != nil || len(es) != 2 {
		t.Fatalf("entries %v %v", es, err)
	}
	if b, _ := es[1].Str("MessageBody"); b != "there" {
		t.Fatalf("entry order: %q", b)
	}
	attrs, err := es[0].MsgAttrs("MessageAttributes")
	if err != nil || *attrs["s"].StringValue != "v" || strings.Join(attrs["l"].StringListValues, ",") != "x,y" {
		t.Fatalf("nested attributes %+v %v", attrs, err)
	}
	if d, _ := es[1].Intp("DelaySeconds"); d == nil || *d != 5 {
		t.Fatal("delay")
	}
	if names, _ := p.StrList("AttributeNames"); len(names) != 1 || names[0] != "All" {
		t.Fatalf("attribute names %v", names)
	}
	if names, _ := p.StrList("MessageAttributeNames"); len(names) != 1 || names[0] != "Foo" {
		t.Fatalf("bare MessageAttributeName: %v", names)
	}
	if m, _ := p.StrMap("Attributes"); m["VisibilityTimeout"] != "10" {
		t.Fatalf("attributes map %v", m)
	}
	if m, _ := p.StrMap("tags"); m["k"] != "v" {
		t.Fatalf("tags %v", m)
	}
}

func TestXMLEscapesCR(t *testing.T) {
	out := string(wire.RenderXML("ReceiveMessage", wire.Obj{}.Add("Body", "a\r\nb<&>"), true, "rid"))
	if !strings.Contains(out, "a&#xD;&#xA;b&lt;&amp;&gt;") && !strings.Contains(out, "a&#xD;\nb&lt;&amp;&gt;") {
		t.Fatalf("escaping: %s", out)
	}
	if !strings.Contains(out, "<ReceiveMessageResult><Body>") || !strings.Contains(out, "<RequestId>rid</RequestId>") {
		t.Fatalf("envelope: %s", out)
	}
}

func newTestServer() *Server {
	return NewServer(ServerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return time.Unix(1e9, 0) }}, nil)
}

func TestErrorsInBothProtocols(t *testing.T) {
	s := newTestServer()
	// JSON: unknown action.
	r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
	r.Header.Set("X-Amz-Target", "AmazonSQS.FooBar")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 400 || w.Header().Get("x-amzn-query-error") != "InvalidAction;Sender" || w.Header().Get("x-amzn-RequestId") == "" {
		t.Fatalf("json error: %d %v", w.Code, w.Header())
	}
	var body map[string]string
	json.Unmarshal(w.Body.Bytes(), &body)
	if body["__type"] == "" || !strings.Contains(body["message"], "FooBar") {
		t.Fatalf("json body %s", w.Body)
	}
	// Query: missing action, and unknown action.
	for form, code := range map[string]string{"Version=2012-11-05": "MissingAction", "Action=FooBar": "InvalidAction"} {
		r = httptest.NewRequest("POST", "/", strings.NewReader(form))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w = httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != 400 || !strings.Contains(w.Body.String(), "<Code>"+code+"</Code>") || !strings.Contains(w.Body.String(), "<Type>Sender</Type>") {
			t.Fatalf("query %s: %d %s", form, w.Code, w.Body)
		}
	}
}

func TestPanicBecomes500(t *testing.T) {
	s := newTestServer() // no broker: any call into it panics
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{"QueueName":"q"}`))
	r.Header.Set("X-Amz-Target", "AmazonSQS.CreateQueue")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusInternalServerError || !strings.HasPrefix(w.Header().Get("x-amzn-query-error"), "InternalError;Receiver") {
		t.Fatalf("panic: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// The server still answers the next request.
	r = httptest.NewRequest("GET", "/?Action=Nope", nil)
	w = httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 400 {
		t.Fatalf("after panic: %d", w.Code)
	}
}

func TestRequestTooLarge(t *testing.T) {
	s := newTestServer()
	r := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", intake.MaxRequestBytes+1)))
	r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Fatalf("oversized request: %d", w.Code)
	}
}

func FuzzQueryDecode(f *testing.F) {
	f.Add("Action=SendMessage&MessageAttribute.1.Name=a&MessageAttribute.1.Value.DataType=String&MessageAttribute.1.Value.StringValue=x")
	f.Add("SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.BinaryListValue.1=AA==")
	f.Add("Attribute.x.Name=1&Tag.1.Value=2&AttributeName.9=All")
	f.Fuzz(func(t *testing.T, form string) {
		vals, err := url.ParseQuery(form)
		if err != nil {
			return
		}
		p := wire.DecodeQuery(vals)
		exercise(p)
	})
}

func FuzzJSONDecode(f *testing.F) {
	f.Add(`{"QueueUrl":"q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"AAE="}}}`)
	f.Add(`{"Entries":[{"Id":"a","MessageBody":1,"DelaySeconds":"x"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		p, err := wire.DecodeJSON([]byte(body))
		if err != nil {
			return
		}
		exercise(p)
	})
}

// exercise runs every typed accessor; none may panic on any input.
func exercise(p wire.Params) {
	for _, k := range []string{"QueueUrl", "MessageBody", "Action"} {
		p.Str(k)
	}
	p.Intp("DelaySeconds")
	p.StrList("AttributeNames")
	p.StrMap("Attributes")
	p.MsgAttrs("MessageAttributes")
	p.MsgAttrs("MessageSystemAttributes")
	es, _ := p.Entries("Entries")
	for _, e := range es {
		e.Str("Id")
		e.Intp("DelaySeconds")
		e.MsgAttrs("MessageAttributes")
	}
}

func FuzzSigV4(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AK/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc", "20260101T000000Z", "/?a=b")
	f.Fuzz(func(t *testing.T, auth, date, target string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		r := httptest.NewRequest("POST", "/", nil)
		r.URL = u
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Amz-Date", date)
		creds, _ := sigv4.ParseCredentials([]byte(`{"principals":[{"name":"a","access_key_id":"AK","secret_access_key":"s","queues":["*"]}]}`))
		s := NewServer(ServerConfig{Credentials: creds, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
		req := &request{r: r, p: wire.Params{}}
		if sig, err := s.identify(req); err == nil { // must not panic
			_ = s.verify(req, sig, nil)
		}
	})
}
