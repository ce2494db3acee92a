package wire

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
)

// Version is the SNS API version every SNS request carries (Version=); the
// SQS Query protocol sends 2012-11-05, which is how a shared endpoint
// tells the two apart.
const Version = "2010-03-31"

// Namespace is the xmlns of every SNS response.
const Namespace = "http://sns.amazonaws.com/doc/2010-03-31/"

// Output is the result of one action, rendered by RenderResponse. The
// set is closed: one type per action, below.
type Output interface {
	// Action is the action's name, which names the response elements.
	Action() string
	// appendResult writes the <{Action}Result> element, or nothing for
	// actions the model gives no output.
	appendResult(b *bytes.Buffer)
}

// RenderResponse is the XML body of a successful answer:
//
//	<{Op}Response xmlns="…"><{Op}Result>…</{Op}Result><ResponseMetadata><RequestId>…</RequestId></ResponseMetadata></{Op}Response>
//
// The {Op}Result wrapper is there for every action that has an output in
// the model (the SDKs look the result up by that name); actions without
// one still get a body with the metadata, as botocore refuses an empty
// 200. Empty lists and maps are empty elements (<Topics/>).
func RenderResponse(out Output, requestID string) []byte {
	var b bytes.Buffer
	op := out.Action()
	b.WriteString("<" + op + `Response xmlns="` + Namespace + `">`)
	out.appendResult(&b)
	b.WriteString("<ResponseMetadata>")
	element(&b, "RequestId", requestID)
	b.WriteString("</ResponseMetadata></" + op + "Response>")
	return b.Bytes()
}

// WriteResponse answers the request with out (see RenderResponse), 200.
func WriteResponse(w http.ResponseWriter, out Output, requestID string) {
	writeXML(w, http.StatusOK, RenderResponse(out, requestID), requestID)
}

// element writes <name>text</name>, the text escaped.
func element(b *bytes.Buffer, name, text string) {
	b.WriteString("<" + name + ">")
	// EscapeText writes CR as &#xD; (so parsers keep it) and replaces
	// what XML cannot carry with U+FFFD.
	_ = xml.EscapeText(b, []byte(text))
	b.WriteString("</" + name + ">")
}

// optional writes the element unless text is empty.
func optional(b *bytes.Buffer, name, text string) {
	if text != "" {
		element(b, name, text)
	}
}

// list writes <name><member>…</member>…</name>, or <name/> when n is 0.
func list(b *bytes.Buffer, name string, n int, item func(i int)) {
	if n == 0 {
		b.WriteString("<" + name + "/>")
		return
	}
	b.WriteString("<" + name + ">")
	for i := range n {
		b.WriteString("<member>")
		item(i)
		b.WriteString("</member>")
	}
	b.WriteString("</" + name + ">")
}

// attributeMap writes <name><entry><key>K</key><value>V</value></entry>…</name>
// in key order, or <name/> when m is empty.
func attributeMap(b *bytes.Buffer, name string, m map[string]string) {
	if len(m) == 0 {
		b.WriteString("<" + name + "/>")
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteString("<" + name + ">")
	for _, k := range keys {
		b.WriteString("<entry>")
		element(b, "key", k)
		element(b, "value", m[k])
		b.WriteString("</entry>")
	}
	b.WriteString("</" + name + ">")
}

func result(b *bytes.Buffer, op string, body func()) {
	b.WriteString("<" + op + "Result>")
	body()
	b.WriteString("</" + op + "Result>")
}

// CreateTopicOutput is CreateTopic's result.
type CreateTopicOutput struct{ TopicARN string }

func (CreateTopicOutput) Action() string { return "CreateTopic" }
func (o CreateTopicOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() { element(b, "TopicArn", o.TopicARN) })
}

// DeleteTopicOutput is DeleteTopic's (empty) result.
type DeleteTopicOutput struct{}

func (DeleteTopicOutput) Action() string             { return "DeleteTopic" }
func (DeleteTopicOutput) appendResult(*bytes.Buffer) {}

// ListTopicsOutput is one page of ListTopics.
type ListTopicsOutput struct {
	TopicARNs []string
	NextToken string // "" on the last page
}

func (ListTopicsOutput) Action() string { return "ListTopics" }
func (o ListTopicsOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() {
		list(b, "Topics", len(o.TopicARNs), func(i int) { element(b, "TopicArn", o.TopicARNs[i]) })
		optional(b, "NextToken", o.NextToken)
	})
}

// GetTopicAttributesOutput is GetTopicAttributes' result.
type GetTopicAttributesOutput struct{ Attributes map[string]string }

func (GetTopicAttributesOutput) Action() string { return "GetTopicAttributes" }
func (o GetTopicAttributesOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() { attributeMap(b, "Attributes", o.Attributes) })
}

// SetTopicAttributesOutput is SetTopicAttributes' (empty) result.
type SetTopicAttributesOutput struct{}

func (SetTopicAttributesOutput) Action() string             { return "SetTopicAttributes" }
func (SetTopicAttributesOutput) appendResult(*bytes.Buffer) {}

// SubscribeOutput is Subscribe's result.
type SubscribeOutput struct{ SubscriptionARN string }

func (SubscribeOutput) Action() string { return "Subscribe" }
func (o SubscribeOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() { element(b, "SubscriptionArn", o.SubscriptionARN) })
}

// ConfirmSubscriptionOutput is ConfirmSubscription's result.
type ConfirmSubscriptionOutput struct{ SubscriptionARN string }

func (ConfirmSubscriptionOutput) Action() string { return "ConfirmSubscription" }
func (o ConfirmSubscriptionOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() { element(b, "SubscriptionArn", o.SubscriptionARN) })
}

// UnsubscribeOutput is Unsubscribe's (empty) result.
type UnsubscribeOutput struct{}

func (UnsubscribeOutput) Action() string             { return "Unsubscribe" }
func (UnsubscribeOutput) appendResult(*bytes.Buffer) {}

// Subscription is one subscription as the list actions show it.
type Subscription struct {
	SubscriptionARN string
	Owner           string
	Protocol        string
	Endpoint        string
	TopicARN        string
}

func subscriptions(b *bytes.Buffer, subs []Subscription) {
	list(b, "Subscriptions", len(subs), func(i int) {
		s := subs[i]
		element(b, "SubscriptionArn", s.SubscriptionARN)
		element(b, "Owner", s.Owner)
		element(b, "Protocol", s.Protocol)
		element(b, "Endpoint", s.Endpoint)
		element(b, "TopicArn", s.TopicARN)
	})
}

// ListSubscriptionsOutput is one page of ListSubscriptions.
type ListSubscriptionsOutput struct {
	Subscriptions []Subscription
	NextToken     string // "" on the last page
}

func (ListSubscriptionsOutput) Action() string { return "ListSubscriptions" }
func (o ListSubscriptionsOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() {
		subscriptions(b, o.Subscriptions)
		optional(b, "NextToken", o.NextToken)
	})
}

// ListSubscriptionsByTopicOutput is one page of ListSubscriptionsByTopic.
type ListSubscriptionsByTopicOutput struct {
	Subscriptions []Subscription
	NextToken     string // "" on the last page
}

func (ListSubscriptionsByTopicOutput) Action() string { return "ListSubscriptionsByTopic" }
func (o ListSubscriptionsByTopicOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() {
		subscriptions(b, o.Subscriptions)
		optional(b, "NextToken", o.NextToken)
	})
}

// GetSubscriptionAttributesOutput is GetSubscriptionAttributes' result.
type GetSubscriptionAttributesOutput struct{ Attributes map[string]string }

func (GetSubscriptionAttributesOutput) Action() string { return "GetSubscriptionAttributes" }
func (o GetSubscriptionAttributesOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() { attributeMap(b, "Attributes", o.Attributes) })
}

// SetSubscriptionAttributesOutput is SetSubscriptionAttributes' (empty)
// result.
type SetSubscriptionAttributesOutput struct{}

func (SetSubscriptionAttributesOutput) Action() string             { return "SetSubscriptionAttributes" }
func (SetSubscriptionAttributesOutput) appendResult(*bytes.Buffer) {}

// PublishOutput is Publish's result.
type PublishOutput struct {
	MessageID string
	// SequenceNumber is set for FIFO topics only.
	SequenceNumber string
}

func (PublishOutput) Action() string { return "Publish" }
func (o PublishOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() {
		element(b, "MessageId", o.MessageID)
		optional(b, "SequenceNumber", o.SequenceNumber)
	})
}

// PublishBatchResultEntry is one published entry of a batch.
type PublishBatchResultEntry struct {
	ID        string
	MessageID string
	// SequenceNumber is set for FIFO topics only.
	SequenceNumber string
}

// BatchResultErrorEntry is one entry of a batch that was not published.
type BatchResultErrorEntry struct {
	ID          string
	Code        Code
	Message     string
	SenderFault bool
}

// FailedEntry is the failure of the entry id with err, worded as err
// would be answered on its own (an error other than an *Error is an
// internal one, without its text).
func FailedEntry(id string, err error) BatchResultErrorEntry {
	e := asError(err)
	return BatchResultErrorEntry{ID: id, Code: e.Code, Message: e.Message, SenderFault: e.Type() == "Sender"}
}

// PublishBatchOutput is PublishBatch's result. AWS always sends both
// lists, the empty one as an empty element.
type PublishBatchOutput struct {
	Successful []PublishBatchResultEntry
	Failed     []BatchResultErrorEntry
}

func (PublishBatchOutput) Action() string { return "PublishBatch" }
func (o PublishBatchOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() {
		list(b, "Successful", len(o.Successful), func(i int) {
			s := o.Successful[i]
			element(b, "Id", s.ID)
			element(b, "MessageId", s.MessageID)
			optional(b, "SequenceNumber", s.SequenceNumber)
		})
		list(b, "Failed", len(o.Failed), func(i int) {
			f := o.Failed[i]
			element(b, "Id", f.ID)
			element(b, "Code", string(f.Code))
			optional(b, "Message", f.Message)
			element(b, "SenderFault", strconv.FormatBool(f.SenderFault))
		})
	})
}

// TagResourceOutput is TagResource's result: an empty TagResourceResult
// (the model has the wrapper).
type TagResourceOutput struct{}

func (TagResourceOutput) Action() string { return "TagResource" }
func (TagResourceOutput) appendResult(b *bytes.Buffer) {
	b.WriteString("<TagResourceResult/>")
}

// UntagResourceOutput is UntagResource's result: an empty
// UntagResourceResult.
type UntagResourceOutput struct{}

func (UntagResourceOutput) Action() string { return "UntagResource" }
func (UntagResourceOutput) appendResult(b *bytes.Buffer) {
	b.WriteString("<UntagResourceResult/>")
}

// ListTagsForResourceOutput is ListTagsForResource's result, the tags in
// the order given.
type ListTagsForResourceOutput struct{ Tags []Tag }

func (ListTagsForResourceOutput) Action() string { return "ListTagsForResource" }
func (o ListTagsForResourceOutput) appendResult(b *bytes.Buffer) {
	result(b, o.Action(), func() {
		list(b, "Tags", len(o.Tags), func(i int) {
			element(b, "Key", o.Tags[i].Key)
			element(b, "Value", o.Tags[i].Value)
		})
	})
}
