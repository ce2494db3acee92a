package wire

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	st "github.com/sluicemq/sluice/sluicetype"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs\n got: %s\nwant: %s", name, got, want)
	}
}

const requestID = "7a62c49f-347e-4fc4-9331-6e8eEXAMPLE"

const (
	topicARN = "arn:aws:sns:us-east-1:000000000000:t1"
	subARN   = "arn:aws:sns:us-east-1:000000000000:t1:6f1c2c4e-8a4b-4c4e-9c4e-2c4e8a4b4c4e"
	queueARN = "arn:aws:sqs:us-east-1:000000000000:q1"
)

// The response shapes the SDKs read, as encoding/xml structures: the
// {Op}Result wrapper, <member> lists, <entry><key/><value/> maps.
type (
	xmlMetadata struct {
		RequestID string `xml:"ResponseMetadata>RequestId"`
	}
	xmlEntry struct {
		Key   string `xml:"key"`
		Value string `xml:"value"`
	}
	xmlSubscription struct {
		SubscriptionArn, Owner, Protocol, Endpoint, TopicArn string
	}
	xmlResponse struct {
		XMLName xml.Name
		xmlMetadata
		Result *struct {
			XMLName         xml.Name
			TopicArn        string
			SubscriptionArn string
			MessageId       string
			SequenceNumber  string
			NextToken       string
			Topics          *struct {
				Members []struct{ TopicArn string } `xml:"member"`
			}
			Subscriptions *struct {
				Members []xmlSubscription `xml:"member"`
			}
			Attributes *struct {
				Entries []xmlEntry `xml:"entry"`
			}
			Tags *struct {
				Members []struct{ Key, Value string } `xml:"member"`
			}
			Successful *struct {
				Members []struct{ Id, MessageId, SequenceNumber string } `xml:"member"`
			}
			Failed *struct {
				Members []struct {
					Id, Code, Message string
					SenderFault       bool
				} `xml:"member"`
			}
		} `xml:",any"`
	}
)

func TestRenderResponses(t *testing.T) {
	tests := []struct {
		name  string
		out   Output
		check func(t *testing.T, r xmlResponse)
	}{
		{"CreateTopic", CreateTopicOutput{TopicARN: topicARN}, func(t *testing.T, r xmlResponse) {
			if r.Result.TopicArn != topicARN {
				t.Errorf("TopicArn = %q", r.Result.TopicArn)
			}
		}},
		{"DeleteTopic", DeleteTopicOutput{}, nil},
		{"ListTopics", ListTopicsOutput{TopicARNs: []string{topicARN, topicARN + ".fifo"}, NextToken: "next"}, func(t *testing.T, r xmlResponse) {
			if len(r.Result.Topics.Members) != 2 || r.Result.Topics.Members[1].TopicArn != topicARN+".fifo" || r.Result.NextToken != "next" {
				t.Errorf("Topics = %+v, NextToken %q", r.Result.Topics, r.Result.NextToken)
			}
		}},
		{"ListTopics_empty", ListTopicsOutput{}, func(t *testing.T, r xmlResponse) {
			if r.Result.Topics == nil || len(r.Result.Topics.Members) != 0 {
				t.Errorf("Topics = %+v, want an empty element", r.Result.Topics)
			}
		}},
		{"GetTopicAttributes", GetTopicAttributesOutput{Attributes: map[string]string{
			"TopicArn": topicARN, "DisplayName": "", "Policy": `{"Version":"2008-10-17","Statement":[{"Sid":"<&>"}]}`,
		}}, func(t *testing.T, r xmlResponse) {
			want := []xmlEntry{{"DisplayName", ""}, {"Policy", `{"Version":"2008-10-17","Statement":[{"Sid":"<&>"}]}`}, {"TopicArn", topicARN}}
			if !reflect.DeepEqual(r.Result.Attributes.Entries, want) {
				t.Errorf("Attributes = %+v", r.Result.Attributes.Entries)
			}
		}},
		{"SetTopicAttributes", SetTopicAttributesOutput{}, nil},
		{"Subscribe", SubscribeOutput{SubscriptionARN: subARN}, func(t *testing.T, r xmlResponse) {
			if r.Result.SubscriptionArn != subARN {
				t.Errorf("SubscriptionArn = %q", r.Result.SubscriptionArn)
			}
		}},
		{"ConfirmSubscription", ConfirmSubscriptionOutput{SubscriptionARN: subARN}, func(t *testing.T, r xmlResponse) {
			if r.Result.SubscriptionArn != subARN {
				t.Errorf("SubscriptionArn = %q", r.Result.SubscriptionArn)
			}
		}},
		{"Unsubscribe", UnsubscribeOutput{}, nil},
		{"ListSubscriptions", ListSubscriptionsOutput{Subscriptions: []Subscription{{subARN, "000000000000", "sqs", queueARN, topicARN}}}, func(t *testing.T, r xmlResponse) {
			want := []xmlSubscription{{subARN, "000000000000", "sqs", queueARN, topicARN}}
			if !reflect.DeepEqual(r.Result.Subscriptions.Members, want) || r.Result.NextToken != "" {
				t.Errorf("Subscriptions = %+v", r.Result.Subscriptions)
			}
		}},
		{"ListSubscriptionsByTopic", ListSubscriptionsByTopicOutput{NextToken: "n"}, func(t *testing.T, r xmlResponse) {
			if r.Result.Subscriptions == nil || len(r.Result.Subscriptions.Members) != 0 || r.Result.NextToken != "n" {
				t.Errorf("Subscriptions = %+v", r.Result.Subscriptions)
			}
		}},
		{"GetSubscriptionAttributes", GetSubscriptionAttributesOutput{Attributes: map[string]string{
			"RawMessageDelivery": "false", "PendingConfirmation": "false", "FilterPolicy": `{"a":["b"]}`,
		}}, func(t *testing.T, r xmlResponse) {
			if len(r.Result.Attributes.Entries) != 3 || r.Result.Attributes.Entries[0] != (xmlEntry{"FilterPolicy", `{"a":["b"]}`}) {
				t.Errorf("Attributes = %+v", r.Result.Attributes.Entries)
			}
		}},
		{"SetSubscriptionAttributes", SetSubscriptionAttributesOutput{}, nil},
		{"Publish", PublishOutput{MessageID: "m1"}, func(t *testing.T, r xmlResponse) {
			if r.Result.MessageId != "m1" || r.Result.SequenceNumber != "" {
				t.Errorf("= %+v", r.Result)
			}
		}},
		{"Publish_fifo", PublishOutput{MessageID: "m1", SequenceNumber: "10000000000000003000"}, func(t *testing.T, r xmlResponse) {
			if r.Result.SequenceNumber != "10000000000000003000" {
				t.Errorf("SequenceNumber = %q", r.Result.SequenceNumber)
			}
		}},
		{"PublishBatch", PublishBatchOutput{
			Successful: []PublishBatchResultEntry{{ID: "e1", MessageID: "m1"}, {ID: "e2", MessageID: "m2", SequenceNumber: "2"}},
		}, func(t *testing.T, r xmlResponse) {
			if len(r.Result.Successful.Members) != 2 || r.Result.Successful.Members[1].SequenceNumber != "2" {
				t.Errorf("Successful = %+v", r.Result.Successful)
			}
			if r.Result.Failed == nil || len(r.Result.Failed.Members) != 0 {
				t.Errorf("Failed = %+v, want an empty element", r.Result.Failed)
			}
		}},
		{"PublishBatch_failed", PublishBatchOutput{
			Failed: []BatchResultErrorEntry{FailedEntry("e1", InvalidParameter("Invalid parameter: x")), FailedEntry("e2", errors.New("disk on fire"))},
		}, func(t *testing.T, r xmlResponse) {
			f := r.Result.Failed.Members
			if len(f) != 2 || f[0].Code != "InvalidParameter" || !f[0].SenderFault || f[1].Code != "InternalError" || f[1].SenderFault || f[1].Message != "Internal Error" {
				t.Errorf("Failed = %+v", f)
			}
		}},
		{"TagResource", TagResourceOutput{}, func(t *testing.T, r xmlResponse) {
			if r.Result.XMLName.Local != "TagResourceResult" {
				t.Errorf("result %q", r.Result.XMLName.Local)
			}
		}},
		{"UntagResource", UntagResourceOutput{}, func(t *testing.T, r xmlResponse) {
			if r.Result.XMLName.Local != "UntagResourceResult" {
				t.Errorf("result %q", r.Result.XMLName.Local)
			}
		}},
		{"ListTagsForResource", ListTagsForResourceOutput{Tags: []Tag{{"k", "v"}, {"empty", ""}}}, func(t *testing.T, r xmlResponse) {
			if len(r.Result.Tags.Members) != 2 || r.Result.Tags.Members[1].Key != "empty" {
				t.Errorf("Tags = %+v", r.Result.Tags)
			}
		}},
		{"ListTagsForResource_empty", ListTagsForResourceOutput{}, func(t *testing.T, r xmlResponse) {
			if r.Result.Tags == nil || len(r.Result.Tags.Members) != 0 {
				t.Errorf("Tags = %+v, want an empty element", r.Result.Tags)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := RenderResponse(tt.out, requestID)
			golden(t, tt.name+".xml", body)

			var r xmlResponse
			if err := xml.Unmarshal(body, &r); err != nil {
				t.Fatalf("unmarshal: %v\n%s", err, body)
			}
			op := tt.out.Action()
			if r.XMLName.Local != op+"Response" || r.XMLName.Space != Namespace {
				t.Errorf("root = %v", r.XMLName)
			}
			if r.RequestID != requestID {
				t.Errorf("RequestId = %q", r.RequestID)
			}
			if tt.check == nil { // an action without output: metadata only
				if r.Result != nil {
					t.Errorf("unexpected result element %v", r.Result.XMLName)
				}
				return
			}
			if r.Result == nil {
				t.Fatalf("no %sResult", op)
			}
			if r.Result.XMLName.Local != op+"Result" {
				t.Errorf("result element %q, want %sResult", r.Result.XMLName.Local, op)
			}
			tt.check(t, r)
		})
	}
}

type xmlError struct {
	XMLName   xml.Name
	Type      string `xml:"Error>Type"`
	Code      string `xml:"Error>Code"`
	Message   string `xml:"Error>Message"`
	RequestID string `xml:"RequestId"`
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		typ    string
		code   Code
		msg    string
	}{
		{"NotFound", TopicNotFound(), 404, "Sender", CodeNotFound, "Topic does not exist"},
		{"InvalidParameter", InvalidParameter("Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1"), 400, "Sender", CodeInvalidParameter, "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1"},
		{"ParameterValueInvalid", Errorf(CodeParameterValueInvalid, "The message attribute '<a&b>' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."), 400, "Sender", CodeParameterValueInvalid, "The message attribute '<a&b>' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."},
		{"Internal", fmt.Errorf("store: %w", errors.New("disk full")), 500, "Receiver", CodeInternalError, "Internal Error"},
		{"ValidationError", Errorf(CodeValidationError, "1 validation error detected: x"), 400, "Sender", CodeValidationError, "1 validation error detected: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := RenderError(tt.err, requestID)
			golden(t, "Error_"+tt.name+".xml", body)
			if status != tt.status {
				t.Errorf("status = %d, want %d", status, tt.status)
			}
			var e xmlError
			if err := xml.Unmarshal(body, &e); err != nil {
				t.Fatalf("unmarshal: %v\n%s", err, body)
			}
			if e.XMLName.Local != "ErrorResponse" || e.XMLName.Space != Namespace || e.Type != tt.typ ||
				e.Code != string(tt.code) || e.Message != tt.msg || e.RequestID != requestID {
				t.Errorf("= %+v", e)
			}
		})
	}
}

// TestErrorCatalog checks every code's status and fault against the
// reference's table.
func TestErrorCatalog(t *testing.T) {
	want := map[int][]Code{
		400: {CodeInvalidParameter, CodeParameterValueInvalid, CodeTagLimitExceeded, CodeStaleTag, CodeTagPolicy,
			CodeConcurrentAccess, CodeInvalidState, CodeValidationException, CodeKMSDisabled, CodeKMSInvalidState,
			CodeKMSNotFound, CodeKMSAccessDenied, CodeKMSThrottling, CodeEndpointDisabled,
			CodeTooManyEntriesInBatchRequest, CodeBatchEntryIdsNotDistinct, CodeBatchRequestTooLong,
			CodeEmptyBatchRequest, CodeInvalidBatchEntryID, CodeValidationError, CodeInvalidAction, CodeMissingParameter,
			CodeInvalidParameterValue},
		403: {CodeAuthorizationError, CodeTopicLimitExceeded, CodeSubscriptionLimitExceeded, CodeFilterPolicyLimitExceeded,
			CodeReplayLimitExceeded, CodeInvalidSecurity, CodeKMSOptInRequired},
		404: {CodeNotFound, CodeResourceNotFound, CodeMalformedQueryString},
		429: {CodeThrottled},
		500: {CodeInternalError, CodeInternalFailure},
	}
	for status, codes := range want {
		for _, c := range codes {
			e := &Error{Code: c}
			if e.Status() != status {
				t.Errorf("%s: status %d, want %d", c, e.Status(), status)
			}
			if wantType := map[bool]string{true: "Receiver", false: "Sender"}[status >= 500]; e.Type() != wantType {
				t.Errorf("%s: type %s, want %s", c, e.Type(), wantType)
			}
		}
	}
	if e := (&Error{Code: "Bogus"}); e.Status() != 500 || e.Type() != "Receiver" {
		t.Errorf("unknown code: %d %s", e.Status(), e.Type())
	}
	// An unknown code is never rendered as such.
	if status, body := RenderError(&Error{Code: "Bogus", Message: "secret"}, "r"); status != 500 || bytes.Contains(body, []byte("secret")) {
		t.Errorf("unknown code rendered %d %s", status, body)
	}
}

// TestRenderSluiceErrors: errors of the shared front and the broker
// (sluicetype codes) answer with SNS codes.
func TestRenderSluiceErrors(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   Code
		msg    string
	}{
		{st.Errorf("SignatureDoesNotMatch", "The request signature we calculated does not match."), 403, CodeSignatureDoesNotMatch, "The request signature we calculated does not match."},
		{st.Errorf(st.CodeAccessDenied, "denied"), 403, CodeAuthorizationError, "denied"},
		{st.Errorf(st.CodeRequestThrottled, "slow down"), 429, CodeThrottled, "slow down"},
		{st.Errorf(st.CodeServiceUnavailable, "shutting down"), 503, CodeServiceUnavailable, "shutting down"},
		{st.Errorf("MalformedInput", "bad form"), 404, CodeMalformedQueryString, "bad form"},
		{st.Errorf("RequestEntityTooLarge", "too big"), 413, CodeRequestEntityTooLarge, "too big"},
		{st.Errorf(st.CodeInternal, "fsync failed at /data/x"), 500, CodeInternalError, "Internal Error"},
		{st.Errorf(st.CodeQueueDoesNotExist, "no queue"), 500, CodeInternalError, "Internal Error"},
	}
	for _, tt := range tests {
		status, body := RenderError(tt.err, requestID)
		var e xmlError
		if err := xml.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		if status != tt.status || e.Code != string(tt.code) || e.Message != tt.msg {
			t.Errorf("%v: %d %s %q, want %d %s %q", tt.err, status, e.Code, e.Message, tt.status, tt.code, tt.msg)
		}
	}
	if CodeOf(fmt.Errorf("wrapped: %w", TopicNotFound())) != CodeNotFound || CodeOf(errors.New("x")) != CodeInternalError {
		t.Error("CodeOf")
	}
}

func TestWriteResponseAndError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteResponse(w, DeleteTopicOutput{}, requestID)
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/xml" || w.Header().Get("x-amzn-RequestId") != requestID {
		t.Errorf("response %d %v", w.Code, w.Header())
	}
	if want := `<DeleteTopicResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><ResponseMetadata><RequestId>` + requestID + `</RequestId></ResponseMetadata></DeleteTopicResponse>`; w.Body.String() != want {
		t.Errorf("body %s", w.Body)
	}
	w = httptest.NewRecorder()
	WriteError(w, SubscriptionNotFound(), requestID)
	if w.Code != 404 || w.Header().Get("Content-Type") != "text/xml" || !strings.Contains(w.Body.String(), "<Code>NotFound</Code><Message>Subscription does not exist</Message>") {
		t.Errorf("error %d %v %s", w.Code, w.Header(), w.Body)
	}
	if w.Header().Get("Content-Length") != fmt.Sprint(w.Body.Len()) {
		t.Errorf("Content-Length %s for %d bytes", w.Header().Get("Content-Length"), w.Body.Len())
	}
}

// TestXMLEscaping: text that XML cannot carry as is still parses back.
func TestXMLEscaping(t *testing.T) {
	attrs := map[string]string{"k": "a<b>&\"c'\r\n\td\x00\uFFFE"}
	body := RenderResponse(GetTopicAttributesOutput{Attributes: attrs}, "<id>")
	var r xmlResponse
	if err := xml.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if got := r.Result.Attributes.Entries[0].Value; got != "a<b>&\"c'\r\n\td\uFFFD\uFFFD" {
		t.Errorf("value %q", got)
	}
	if r.RequestID != "<id>" {
		t.Errorf("RequestId %q", r.RequestID)
	}
}
