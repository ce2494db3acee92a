package sqs_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sqs"
	"github.com/sluicemq/sluice/internal/sqs/intake"
)

// What a hostile or careless client can do, tried over real HTTP.

var twoPrincipals = `{"principals":[
	{"name":"alice","access_key_id":"AKALICE","secret_access_key":"s3cret","queues":["alice-*"]},
	{"name":"bob","access_key_id":"AKBOB","secret_access_key":"b0b","queues":["bob-*"]}]}`

func twoPrincipalServer(t *testing.T, scfg sqs.ServerConfig) *env {
	t.Helper()
	creds, err := sigv4.ParseCredentials([]byte(twoPrincipals))
	if err != nil {
		t.Fatal(err)
	}
	scfg.Credentials = creds
	return startServer(t, scfg, "")
}

// rawRequest opens a connection and sends a request's header and the
// first part of its body; the rest is the caller's to send (or not).
func rawRequest(t *testing.T, url, header string, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A liveness bound, not a timing assertion: a server that never
	// answers fails the test instead of hanging it.
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(c, header+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return c
}

type rawResponse struct {
	status int
	retry  string
	body   map[string]string
	err    error
}

func readResponse(c net.Conn) rawResponse {
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return rawResponse{err: err}
	}
	defer resp.Body.Close()
	var body map[string]string
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	return rawResponse{status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), body: body}
}

func jsonHeader(action string, length int, extra ...string) string {
	h := "POST / HTTP/1.1\r\nHost: sluice\r\nX-Amz-Target: AmazonSQS." + action +
		"\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: " + fmt.Sprint(length) + "\r\n"
	for _, e := range extra {
		h += e + "\r\n"
	}
	return h
}

// forged is an Authorization header with a known access key and a
// current date but a wrong signature: it passes every check that does not
// need the body, and fails the one that does.
func forged(key string) []string {
	now := time.Now().UTC()
	return []string{
		"X-Amz-Date: " + now.Format("20060102T150405Z"),
		"Authorization: AWS4-HMAC-SHA256 Credential=" + key + "/" + now.Format("20060102") +
			"/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("0", 64),
	}
}

// TestUnsignedBodyIsNotRead: with credentials on, an unsigned request (or
// one with an unknown key) is refused from its header alone: the server
// answers 403 while the client has not sent a byte of its 5 MiB body, so
// parallel unsigned uploads cost the server no memory.
func TestUnsignedBodyIsNotRead(t *testing.T) {
	e := twoPrincipalServer(t, sqs.ServerConfig{})
	for name, extra := range map[string][]string{"unsigned": nil, "unknown key": forged("AKNOBODY")} {
		c := rawRequest(t, e.url, jsonHeader("SendMessage", intake.MaxRequestBytes, extra...), `{"x":[0,0,0`)
		r := readResponse(c)
		if r.err != nil || r.status != 403 {
			t.Fatalf("%s: %d %v, want 403 before the body", name, r.status, r.err)
		}
		if !strings.Contains(r.body["__type"], "MissingAuthenticationToken") && !strings.Contains(r.body["__type"], "InvalidClientTokenId") {
			t.Errorf("%s: answered %v (want a JSON error, the request's protocol)", name, r.body)
		}
	}
}

// TestInflightBodiesAreBounded: the bodies held at once are bounded. With
// room for one 4 MiB body, of two such requests (from a known key, so they
// pass the header checks) one is admitted and waits for its body, the other
// is refused with a retryable ServiceUnavailable; once the first is done
// its room is free again.
func TestInflightBodiesAreBounded(t *testing.T) {
	e := twoPrincipalServer(t, sqs.ServerConfig{MaxInflightBytes: intake.MaxRequestBytes})
	const size = 4 << 20
	head := jsonHeader("SendMessage", size, forged("AKALICE")...)
	conns := []net.Conn{rawRequest(t, e.url, head, ""), rawRequest(t, e.url, head, "")}
	answers := make(chan int, 2)
	resps := make([]rawResponse, 2)
	for i, c := range conns {
		go func() { resps[i] = readResponse(c); answers <- i }()
	}
	first := <-answers
	if r := resps[first]; r.status != 503 || r.retry == "" || !strings.Contains(r.body["message"], "in flight") {
		t.Fatalf("the request with no room: %+v, want 503 ServiceUnavailable with Retry-After", r)
	}
	admitted := conns[1-first]
	if _, err := io.WriteString(admitted, strings.Repeat(" ", size)); err != nil {
		t.Fatal(err)
	}
	<-answers
	if r := resps[1-first]; r.status != 403 || !strings.Contains(r.body["__type"], "SignatureDoesNotMatch") {
		t.Fatalf("the admitted request, body sent: %+v, want its (forged) signature checked", r)
	}
	// The room is back: a third request is admitted and read.
	c := rawRequest(t, e.url, head, strings.Repeat(" ", size))
	if r := readResponse(c); r.status != 403 || !strings.Contains(r.body["__type"], "SignatureDoesNotMatch") {
		t.Fatalf("after the first finished: %+v", r)
	}
}

// TestHostileBodies: a body over the limit gets its 413 in the request's
// protocol (JSON here, not XML); invalid UTF-8 and a lone surrogate are
// refused as InvalidMessageContents (Query refuses them the same way)
// rather than stored altered; a body that would decode to millions of
// values is refused.
func TestHostileBodies(t *testing.T) {
	e := start(t, nil, "")
	q := must(e.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("q")}))
	qurl := aws.ToString(q.QueueUrl)
	c := rawRequest(t, e.url, jsonHeader("SendMessage", intake.MaxRequestBytes+1), "")
	if r := readResponse(c); r.status != 413 || !strings.Contains(r.body["__type"], "RequestEntityTooLarge") {
		t.Errorf("oversized JSON request: %+v, want a JSON 413", r)
	}
	for name, body := range map[string]string{
		"invalid UTF-8":  `{"QueueUrl":"` + qurl + `","MessageBody":"a` + "\xff" + `b"}`,
		"lone surrogate": `{"QueueUrl":"` + qurl + `","MessageBody":"a\ud800b"}`,
	} {
		c := rawRequest(t, e.url, jsonHeader("SendMessage", len(body)), body)
		if r := readResponse(c); r.status != 400 || !strings.Contains(r.body["__type"], "InvalidMessageContents") {
			t.Errorf("%s over JSON: %+v, want InvalidMessageContents", name, r)
		}
	}
	form := "Action=SendMessage&QueueUrl=" + qurl + "&MessageBody=a%FFb"
	resp, err := http.Post(e.url+"/", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(raw), "InvalidMessageContents") {
		t.Errorf("invalid UTF-8 over Query: %d %s", resp.StatusCode, raw)
	}
	huge := `{"x":[` + strings.Repeat("0,", 2<<20) + `0]}`
	c = rawRequest(t, e.url, jsonHeader("SendMessage", len(huge)), huge)
	if r := readResponse(c); r.status != 400 || !strings.Contains(r.body["message"], "JSON values") {
		t.Errorf("two million values: %+v", r)
	}
	_, err = e.client.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String("1e400")}}})
	if apiCode(err) != "InvalidParameterValue" {
		t.Errorf("Number 1e400: %v", err)
	}
	got := must(e.client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}}))
	if n := got.Attributes["ApproximateNumberOfMessages"]; n != "0" {
		t.Errorf("%s messages stored from refused requests", n)
	}
}

// TestNoWritesIntoAnotherPrincipalsQueue: a principal cannot reach a queue
// outside its patterns through a queue it owns: not as a RedrivePolicy
// target (set or at creation), not as a move task's destination; and the
// refusal is the one a missing queue gets, so it tells nothing of which
// queues exist.
func TestNoWritesIntoAnotherPrincipalsQueue(t *testing.T) {
	e := twoPrincipalServer(t, sqs.ServerConfig{})
	alice := newClient(e.url, "AKALICE", "s3cret", "")
	bob := newClient(e.url, "AKBOB", "b0b", "")
	aliceQ := must(alice.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("alice-q")}))
	bobQ := must(bob.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bob-q")}))
	must(bob.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bob-dlq")}))
	arn := func(name string) string { return "arn:aws:sqs:us-east-1:000000000000:" + name }
	policy := func(target string) map[string]string {
		return map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn(target) + `","maxReceiveCount":"1"}`}
	}
	errText := func(err error) string {
		if err == nil {
			return "accepted"
		}
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode() + ": " + ae.ErrorMessage()
		}
		return err.Error()
	}
	_, missing := bob.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: bobQ.QueueUrl, Attributes: policy("bob-nope")})
	if missing == nil {
		t.Fatal("a missing dead-letter target accepted")
	}
	_, err := bob.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: bobQ.QueueUrl, Attributes: policy("alice-q")})
	if errText(err) != errText(missing) {
		t.Errorf("bob sets alice-q as his dead-letter target: %q, want the missing-target error %q", errText(err), errText(missing))
	}
	_, err = bob.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("bob-q2"), Attributes: policy("alice-q")})
	if errText(err) != errText(missing) {
		t.Errorf("bob creates a queue dead-lettering into alice-q: %q", errText(err))
	}
	_, err = bob.StartMessageMoveTask(ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn("bob-dlq")), DestinationArn: aws.String(arn("alice-q"))})
	if err == nil {
		t.Errorf("bob moves his messages into alice-q")
	}
	_, err = bob.ListDeadLetterSourceQueues(ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: aliceQ.QueueUrl})
	if apiCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("bob lists alice-q's sources: %v", err)
	}
	// A target of his own is fine; alice's queue received nothing.
	must(bob.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: bobQ.QueueUrl, Attributes: policy("bob-dlq")}))
	got := must(alice.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aliceQ.QueueUrl,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}}))
	if got.Attributes["ApproximateNumberOfMessages"] != "0" || got.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		t.Errorf("alice-q holds bob's messages: %v", got.Attributes)
	}
}
