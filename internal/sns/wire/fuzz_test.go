package wire

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/url"
	"testing"
	"time"
)

var actions = []string{
	"CreateTopic", "DeleteTopic", "ListTopics", "GetTopicAttributes", "SetTopicAttributes", "Subscribe",
	"ConfirmSubscription", "Unsubscribe", "ListSubscriptions", "ListSubscriptionsByTopic",
	"GetSubscriptionAttributes", "SetSubscriptionAttributes", "Publish", "PublishBatch", "TagResource",
	"UntagResource", "ListTagsForResource",
}

// FuzzDecode: no form makes Decode, the checks or the delivery panic;
// every error they return renders as a parseable error response with a
// catalogued code; and what passes the checks delivers as valid JSON.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"Name=t1.fifo&Attributes.entry.1.key=FifoTopic&Attributes.entry.1.value=true&Tags.member.1.Key=k&Tags.member.1.Value=v",
		"TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1&Protocol=sqs&Endpoint=arn%3Aaws%3Asqs%3Aus-east-1%3A000000000000%3Aq1&Attributes.entry.1.key=RawMessageDelivery&Attributes.entry.1.value=true&ReturnSubscriptionArn=true",
		"TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1&Message=m&Subject=s&MessageAttributes.entry.1.Name=a&MessageAttributes.entry.1.Value.DataType=Binary&MessageAttributes.entry.1.Value.BinaryValue=AgME",
		"TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1&Message=%7B%22default%22%3A%22d%22%7D&MessageStructure=json&MessageGroupId=g",
		"TopicArn=t&PublishBatchRequestEntries.member.1.Id=1&PublishBatchRequestEntries.member.1.Message=m&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Name=a&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.DataType=String&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.StringValue=x",
		"PublishBatchRequestEntries=&Tags=&TagKeys=&TagKeys.member.1=k",
		"SubscriptionArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1%3Aid&AttributeName=RedrivePolicy&AttributeValue=%7B%7D",
		"Tags.member.01.Key=a&Tags.member.1.Key=b&Attributes.entry.999999999.key=x",
	} {
		for i := range actions {
			f.Add(uint8(i), seed)
		}
	}
	scope := Scope{Region: "us-east-1", Account: "000000000000"}
	ts := time.Unix(1613511679, 978e6)
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		form, _ := url.ParseQuery(body) // a partial form is still a form
		action := actions[int(which)%len(actions)]
		in, err := Decode(action, form)
		check := func(err error) {
			if err == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: error %T %v is not an *Error", action, err, err)
			}
			if _, ok := catalog[e.Code]; !ok {
				t.Fatalf("%s: uncatalogued code %q", action, e.Code)
			}
			_, x := RenderError(err, "id")
			if err := xml.Unmarshal(x, new(xmlError)); err != nil {
				t.Fatalf("error response does not parse: %v\n%s", err, x)
			}
		}
		check(err)
		if err != nil {
			return
		}
		for _, k := range []string{"TopicArn", "TargetArn", "ResourceArn"} {
			_, err := scope.ParseTopicARN(k, form.Get(k))
			check(err)
		}
		_, err = scope.ParseSubscriptionARN(form.Get("SubscriptionArn"))
		check(err)
		_, err = ParseQueueARN(form.Get("Endpoint"))
		check(err)

		settings := []TopicSettings{{}, {FIFO: true}, {FIFO: true, ContentBasedDeduplication: true}, {MaxMessageSize: MinMaximumMessageSize}}
		switch in := in.(type) {
		case CreateTopicInput:
			check(in.Validate())
		case SetTopicAttributesInput:
			check(in.Validate(false))
			check(in.Validate(true))
		case SubscribeInput:
			a := in
			check(a.Validate(false))
			check(in.Validate(true))
		case SetSubscriptionAttributesInput:
			check(in.Validate(SubscriptionContext{TopicFIFO: true, Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:0:q.fifo"}))
		case TagResourceInput:
			check(in.Validate())
		case PublishInput:
			_, err := in.Target()
			check(err)
			for _, s := range settings {
				err := in.Validate(s)
				check(err)
				if err == nil {
					deliver(t, Notification{
						MessageID: "m", TopicARN: in.TopicARN, Message: in.Message, MessageStructure: in.MessageStructure,
						Attributes: in.MessageAttributes, Timestamp: ts, GroupID: in.MessageGroupID,
						DedupID: in.MessageDeduplicationID, Topic: s,
					})
				}
			}
		case PublishBatchInput:
			check(in.CheckEntries())
			for _, s := range settings {
				err := in.Validate(s)
				check(err)
				if err == nil {
					for _, e := range in.Entries {
						deliver(t, Notification{
							MessageID: e.ID, Message: e.Message, MessageStructure: e.MessageStructure,
							Attributes: e.MessageAttributes, Timestamp: ts, Topic: s, GroupID: e.MessageGroupID,
						})
					}
				}
			}
		}
	})
}

// deliver checks the delivery of a validated message: the envelope is
// valid JSON carrying the content, a raw delivery the content itself.
func deliver(t *testing.T, n Notification) {
	t.Helper()
	d := Deliverer{UnsubscribeURL: "https://sns.us-east-1.amazonaws.com/", Signer: fakeSigner{}}
	content, err := n.content("sqs")
	if err != nil {
		t.Fatalf("validated message has no content: %v", err)
	}
	endpoint := "arn:aws:sqs:us-east-1:0:q"
	if n.Topic.FIFO {
		endpoint += ".fifo"
	}
	env, err := d.SQSMessage(n, Target{SubscriptionARN: "s", Endpoint: endpoint})
	if err != nil {
		t.Fatalf("envelope: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(env.Body), &m); err != nil {
		t.Fatalf("envelope is not JSON: %v\n%s", err, env.Body)
	}
	if m["Message"] != string([]rune(content)) {
		t.Fatalf("envelope Message %q, want %q", m["Message"], content)
	}
	raw, err := d.SQSMessage(n, Target{Endpoint: endpoint, Raw: true})
	if err != nil && !errors.Is(err, ErrTooManyAttributes) {
		t.Fatalf("raw: %v", err)
	}
	if err == nil && raw.Body != content {
		t.Fatalf("raw body %q, want %q", raw.Body, content)
	}
}
