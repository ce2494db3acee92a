package wire

import (
	"fmt"
	"strings"
	"testing"
)

var scope = Scope{Region: "us-east-1", Account: "000000000000"}

func TestTopicName(t *testing.T) {
	tests := []struct {
		name string
		fifo bool
		ok   bool
	}{
		{"t1", false, true},
		{"A-z_09", false, true},
		{strings.Repeat("a", 256), false, true},
		{strings.Repeat("a", 251) + ".fifo", true, true},
		{"t1.fifo", true, true},
		{"", false, false},
		{strings.Repeat("a", 257), false, false},
		{strings.Repeat("a", 252) + ".fifo", true, false},
		{"t1.fifo", false, false}, // the suffix without FifoTopic
		{"t1", true, false},       // FifoTopic without the suffix
		{".fifo", true, false},
		{"a:b", false, false}, {"a;b", false, false}, {"a!b", false, false}, {"a@b", false, false},
		{"a|b", false, false}, {"a^b", false, false}, {"a%b", false, false}, {"a b", false, false},
		{"a.b", false, false}, {"é", false, false},
	}
	for _, tt := range tests {
		err := ValidateTopicName(tt.name, tt.fifo)
		if tt.ok {
			if err != nil {
				t.Errorf("ValidateTopicName(%q, %v) = %v", tt.name, tt.fifo, err)
			}
			continue
		}
		wantErr(t, err, CodeInvalidParameter, "Invalid parameter: Topic Name")
	}
}

func TestCreateTopicValidate(t *testing.T) {
	in := CreateTopicInput{Name: "t.fifo", Attributes: map[string]string{
		"FifoTopic": "TRUE", "ContentBasedDeduplication": "False", "MaximumMessageSize": "1048576",
		"SignatureVersion": "2", "FifoThroughputScope": "MessageGroup", "DisplayName": "d",
		"SQSSuccessFeedbackSampleRate": "100", "HTTPFailureFeedbackRoleArn": "arn:aws:iam::0:role/r",
	}}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	if in.Attributes["FifoTopic"] != "true" || in.Attributes["ContentBasedDeduplication"] != "false" {
		t.Errorf("booleans not normalized: %v", in.Attributes)
	}
	std := CreateTopicInput{Name: "t", Attributes: map[string]string{"FifoTopic": "false", "ContentBasedDeduplication": "false"}}
	if err := std.Validate(); err != nil {
		t.Errorf("FifoTopic=false on a standard topic: %v", err)
	}

	const p = "Invalid parameter: Attributes Reason: "
	tests := []struct {
		in  CreateTopicInput
		msg string
	}{
		{CreateTopicInput{Name: "t.fifo"}, "Invalid parameter: Topic Name"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"FifoTopic": "true"}}, "Invalid parameter: Topic Name"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"Bogus": "x"}}, p + "AttributeName"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"FifoTopic": "yes"}}, p + "FifoTopic: Invalid value [yes]. Must be true or false."},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"ContentBasedDeduplication": "true"}}, p + "ContentBasedDeduplication: The attribute is only supported for FIFO topics"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"SignatureVersion": "3"}}, p + "SignatureVersion: Invalid value [3]. Must be 1 or 2."},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"MaximumMessageSize": "1023"}}, p + "MaximumMessageSize: value provided is not an integer between 1024-1048576"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"MaximumMessageSize": "1048577"}}, p + "MaximumMessageSize: value provided is not an integer between 1024-1048576"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"MaximumMessageSize": "big"}}, p + "MaximumMessageSize: value provided is not an integer between 1024-1048576"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"ApplicationSuccessFeedbackSampleRate": "101"}}, p + "ApplicationSuccessFeedbackSampleRate: value provided is not an integer between 0-100"},
		{CreateTopicInput{Name: "t.fifo", Attributes: map[string]string{"FifoTopic": "true", "FifoThroughputScope": "Queue"}}, p + "FifoThroughputScope: Invalid value [Queue]. Please use either Topic or MessageGroup"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"FifoThroughputScope": "Topic"}}, p + "FifoThroughputScope: The attribute is only supported for FIFO topics"},
		{CreateTopicInput{Name: "t", Attributes: map[string]string{"TracingConfig": "On"}}, p + "TracingConfig: Invalid value [On]. Please use either PassThrough or Active"},
		{CreateTopicInput{Name: "t", Tags: []Tag{{"k", "1"}, {"k", "2"}}}, "Invalid parameter: Duplicated keys are not allowed."},
	}
	for _, tt := range tests {
		wantErr(t, tt.in.Validate(), CodeInvalidParameter, tt.msg)
	}
}

func TestSetTopicAttributesValidate(t *testing.T) {
	tests := []struct {
		in   SetTopicAttributesInput
		fifo bool
		msg  string // "" for valid
		want string
	}{
		{SetTopicAttributesInput{AttributeName: "FifoTopic", AttributeValue: "true"}, true, "Invalid parameter: AttributeName", ""},
		{SetTopicAttributesInput{AttributeName: "TopicArn", AttributeValue: "x"}, false, "Invalid parameter: AttributeName", ""},
		{SetTopicAttributesInput{AttributeName: "ContentBasedDeduplication", AttributeValue: "True"}, true, "", "true"},
		{SetTopicAttributesInput{AttributeName: "ContentBasedDeduplication", AttributeValue: "true"}, false, "Invalid parameter: ContentBasedDeduplication: The attribute is only supported for FIFO topics", ""},
		{SetTopicAttributesInput{AttributeName: "SignatureVersion", AttributeValue: "0"}, false, "Invalid parameter: SignatureVersion: Invalid value [0]. Must be 1 or 2.", ""},
		{SetTopicAttributesInput{AttributeName: "MaximumMessageSize", AttributeValue: "2048"}, false, "", "2048"},
		{SetTopicAttributesInput{AttributeName: "Policy", AttributeValue: "{}"}, false, "", "{}"},
	}
	for _, tt := range tests {
		in := tt.in
		err := in.Validate(tt.fifo)
		if tt.msg != "" {
			wantErr(t, err, CodeInvalidParameter, tt.msg)
			continue
		}
		if err != nil || in.AttributeValue != tt.want {
			t.Errorf("%+v: %v, value %q, want %q", tt.in, err, in.AttributeValue, tt.want)
		}
	}
}

func TestTags(t *testing.T) {
	in := TagResourceInput{Tags: []Tag{{"a", "1"}, {"b", "1"}, {"a", "2"}}}
	wantErr(t, in.Validate(), CodeInvalidParameter, "Invalid parameter: Duplicated keys are not allowed.")
	if err := (&TagResourceInput{Tags: []Tag{{"a", ""}, {"b", "x"}}}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestARNs(t *testing.T) {
	t.Run("topic", func(t *testing.T) {
		name, err := scope.ParseTopicARN("TopicArn", "arn:aws:sns:us-east-1:000000000000:t1.fifo")
		if err != nil || name != "t1.fifo" {
			t.Fatalf("= %q, %v", name, err)
		}
		if got := scope.TopicARN("t1"); got != "arn:aws:sns:us-east-1:000000000000:t1" {
			t.Errorf("TopicARN = %q", got)
		}
		tests := []struct {
			param, arn string
			code       Code
			msg        string
		}{
			{"TopicArn", "", CodeInvalidParameter, "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1"},
			{"TopicArn", "unknown", CodeInvalidParameter, "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1"},
			{"TopicArn", "arn:aws:sns:us-east-1:t1", CodeInvalidParameter, "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 5"},
			{"TargetArn", "arn:aws", CodeInvalidParameter, "Invalid parameter: TargetArn Reason: An ARN must have at least 6 elements, not 2"},
			{"TopicArn", "arn:aws:sns:eu-west-1:000000000000:t1", CodeInvalidParameter, "Invalid parameter: TopicArn"},
			{"TopicArn", "arn:aws:sqs:us-east-1:000000000000:t1", CodeInvalidParameter, "Invalid parameter: TopicArn"},
			{"TopicArn", "arn:aws-cn:sns:us-east-1:000000000000:t1", CodeInvalidParameter, "Invalid parameter: TopicArn"},
			{"TopicArn", "urn:aws:sns:us-east-1:000000000000:t1", CodeInvalidParameter, "Invalid parameter: TopicArn"},
			{"TopicArn", "arn:aws:sns:us-east-1:000000000000:t1:sub", CodeInvalidParameter, "Invalid parameter: TopicArn"},
			{"TopicArn", "arn:aws:sns:us-east-1:000000000000:t 1", CodeInvalidParameter, "Invalid parameter: TopicArn"},
			{"TopicArn", "arn:aws:sns:us-east-1:111111111111:t1", CodeNotFound, "Topic does not exist"},
			{"ResourceArn", "arn:aws:sns:us-east-1:111111111111:t1", CodeResourceNotFound, "Resource does not exist"},
		}
		for _, tt := range tests {
			_, err := scope.ParseTopicARN(tt.param, tt.arn)
			wantErr(t, err, tt.code, tt.msg)
		}
	})
	t.Run("subscription", func(t *testing.T) {
		topic, err := scope.ParseSubscriptionARN("arn:aws:sns:us-east-1:000000000000:t1:6f1c2c4e-8a4b-4c4e-9c4e-2c4e8a4b4c4e")
		if err != nil || topic != "arn:aws:sns:us-east-1:000000000000:t1" {
			t.Fatalf("= %q, %v", topic, err)
		}
		tests := []struct {
			arn  string
			code Code
			msg  string
		}{
			{"PendingConfirmation", CodeInvalidParameter, "Invalid parameter: SubscriptionArn Reason: An ARN must have at least 6 elements, not 1"},
			{"arn:aws:sns:us-east-1:000000000000", CodeInvalidParameter, "Invalid parameter: SubscriptionArn Reason: An ARN must have at least 6 elements, not 5"},
			{"arn:aws:sns:us-east-1:000000000000:t1", CodeInvalidParameter, "Invalid parameter: SubscriptionId"},
			{"arn:aws:sns:us-east-1:000000000000:t1:", CodeInvalidParameter, "Invalid parameter: SubscriptionId"},
			{"arn:aws:sns:us-east-1:000000000000:t1:a:b", CodeInvalidParameter, "Invalid parameter: SubscriptionId"},
			{"arn:aws:sns:us-west-2:000000000000:t1:id", CodeInvalidParameter, "Invalid parameter: SubscriptionArn"},
			{"arn:aws:sns:us-east-1:000000000000:t!:id", CodeInvalidParameter, "Invalid parameter: SubscriptionArn"},
			{"arn:aws:sns:us-east-1:111111111111:t1:id", CodeNotFound, "Subscription does not exist"},
		}
		for _, tt := range tests {
			_, err := scope.ParseSubscriptionARN(tt.arn)
			wantErr(t, err, tt.code, tt.msg)
		}
	})
	t.Run("queue", func(t *testing.T) {
		a, err := ParseQueueARN("arn:aws:sqs:eu-west-1:222222222222:q1.fifo")
		if err != nil || a.Resource != "q1.fifo" || a.Region != "eu-west-1" || !IsFIFOQueueARN(a.String()) {
			t.Fatalf("= %+v, %v", a, err)
		}
		for _, bad := range []string{"", "unknown", "http://localhost:4566/000000000000/q1", "arn:aws:sns:us-east-1:000000000000:q1", "arn:aws:sqs:us-east-1::q1", "arn:aws:sqs:us-east-1:0:q:1"} {
			_, err := ParseQueueARN(bad)
			wantErr(t, err, CodeInvalidParameter, "Invalid parameter: SQS endpoint ARN")
		}
	})
}

func TestSubscribeValidate(t *testing.T) {
	const q = "arn:aws:sqs:us-east-1:000000000000:q1"
	const p = "Invalid parameter: Attributes Reason: "
	in := SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{
		"RawMessageDelivery": "True", "FilterPolicyScope": "MessageBody", "FilterPolicy": "not checked here",
		"RedrivePolicy":  `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq"}`,
		"DeliveryPolicy": "{}", "SubscriptionRoleArn": "r",
	}}
	if err := in.Validate(false); err != nil {
		t.Fatal(err)
	}
	if in.Attributes["RawMessageDelivery"] != "true" {
		t.Errorf("RawMessageDelivery = %q, want true", in.Attributes["RawMessageDelivery"])
	}
	// A FIFO topic may deliver to a standard queue (since 2023-09).
	if err := (&SubscribeInput{Protocol: "sqs", Endpoint: q}).Validate(true); err != nil {
		t.Errorf("FIFO topic to standard queue: %v", err)
	}
	if err := (&SubscribeInput{Protocol: "sqs", Endpoint: q + ".fifo", Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq.fifo"}`, "ReplayPolicy": "{}",
	}}).Validate(true); err != nil {
		t.Errorf("FIFO to FIFO with a FIFO DLQ: %v", err)
	}

	tests := []struct {
		in   SubscribeInput
		fifo bool
		msg  string
	}{
		{SubscribeInput{Protocol: "carrier-pigeon", Endpoint: q}, false, "Invalid parameter: Amazon SNS does not support this protocol string: carrier-pigeon"},
		{SubscribeInput{Protocol: "SQS", Endpoint: q}, false, "Invalid parameter: Amazon SNS does not support this protocol string: SQS"},
		{SubscribeInput{Protocol: "sms", Endpoint: "+15555550100"}, true, "Invalid parameter: Invalid protocol type: sms"},
		{SubscribeInput{Protocol: "https", Endpoint: "http://example.com"}, false, "Invalid parameter: Endpoint must match the specified protocol"},
		{SubscribeInput{Protocol: "sqs", Endpoint: "http://localhost:4566/000000000000/q1"}, false, "Invalid parameter: SQS endpoint ARN"},
		{SubscribeInput{Protocol: "sqs", Endpoint: "unknown"}, false, "Invalid parameter: SQS endpoint ARN"},
		{SubscribeInput{Protocol: "sqs"}, false, "Invalid parameter: SQS endpoint ARN"},
		{SubscribeInput{Protocol: "sqs", Endpoint: q + ".fifo"}, false, "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics"},
		{SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{"rawMessageDelivery": "true"}}, false, p + "AttributeName"},
		{SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{"ReplayPolicy": "{}"}}, false, p + "AttributeName"},
		{SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{"RawMessageDelivery": "yes"}}, false, p + "RawMessageDelivery: Invalid value [yes]. Must be true or false."},
		{SubscribeInput{Protocol: "email", Endpoint: "a@example.com", Attributes: map[string]string{"RawMessageDelivery": "true"}}, false, p + "Delivery protocol [email] does not support raw message delivery."},
		{SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{"FilterPolicyScope": "RandomValue"}}, false, p + "FilterPolicyScope: Invalid value [RandomValue]. Please use either MessageBody or MessageAttributes"},
		{SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"not-an-arn"}`}}, false, p + "RedrivePolicy: deadLetterTargetArn is an invalid arn"},
		{SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{"RedrivePolicy": `{}`}}, false, p + "RedrivePolicy: deadLetterTargetArn is an invalid arn"},
		{SubscribeInput{Protocol: "sqs", Endpoint: q + ".fifo", Attributes: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq"}`}}, true, p + "RedrivePolicy: must use a FIFO queue as DLQ for a FIFO Subscription to a FIFO Topic."},
	}
	for _, tt := range tests {
		in := tt.in
		wantErr(t, in.Validate(tt.fifo), CodeInvalidParameter, tt.msg)
	}

	// Bad JSON: AWS's parser text follows the fixed prefix.
	bad := SubscribeInput{Protocol: "sqs", Endpoint: q, Attributes: map[string]string{"RedrivePolicy": "{nope"}}
	err := bad.Validate(false)
	if e, ok := err.(*Error); !ok || e.Code != CodeInvalidParameter || !strings.HasPrefix(e.Message, p+"RedrivePolicy: failed to parse JSON. ") {
		t.Errorf("bad RedrivePolicy JSON: %v", err)
	}
}

func TestSetSubscriptionAttributesValidate(t *testing.T) {
	sc := SubscriptionContext{Protocol: "sqs", Endpoint: "arn:aws:sqs:us-east-1:000000000000:q1"}
	in := SetSubscriptionAttributesInput{AttributeName: "RawMessageDelivery", AttributeValue: "FALSE"}
	if err := in.Validate(sc); err != nil || in.AttributeValue != "false" {
		t.Errorf("= %q, %v", in.AttributeValue, err)
	}
	for _, ok := range []SetSubscriptionAttributesInput{
		{AttributeName: "FilterPolicy", AttributeValue: ""}, // removes the policy
		{AttributeName: "RedrivePolicy", AttributeValue: ""},
		{AttributeName: "FilterPolicyScope", AttributeValue: "MessageAttributes"},
	} {
		if err := ok.Validate(sc); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	tests := []struct {
		in  SetSubscriptionAttributesInput
		msg string
	}{
		{SetSubscriptionAttributesInput{AttributeName: "Owner", AttributeValue: "x"}, "Invalid parameter: AttributeName"},
		{SetSubscriptionAttributesInput{AttributeName: "RawMessageDelivery", AttributeValue: "x"}, "Invalid parameter: RawMessageDelivery: Invalid value [x]. Must be true or false."},
		{SetSubscriptionAttributesInput{AttributeName: "FilterPolicyScope", AttributeValue: "RandomValue"}, "Invalid parameter: FilterPolicyScope: Invalid value [RandomValue]. Please use either MessageBody or MessageAttributes"},
		{SetSubscriptionAttributesInput{AttributeName: "RedrivePolicy", AttributeValue: `{"deadLetterTargetArn":"arn:aws:sns:us-east-1:0:t"}`}, "Invalid parameter: RedrivePolicy: deadLetterTargetArn is an invalid arn"},
	}
	for _, tt := range tests {
		in := tt.in
		wantErr(t, in.Validate(sc), CodeInvalidParameter, tt.msg)
	}
}

func TestPublishTarget(t *testing.T) {
	for _, tt := range []struct{ topic, target, want string }{
		{"a", "", "a"}, {"", "b", "b"}, {"a", "a", "a"},
	} {
		in := PublishInput{TopicARN: tt.topic, TargetARN: tt.target}
		if got, err := in.Target(); err != nil || got != tt.want {
			t.Errorf("Target(%q, %q) = %q, %v", tt.topic, tt.target, got, err)
		}
	}
	_, err := (&PublishInput{}).Target()
	wantErr(t, err, CodeInvalidParameter, "Invalid parameter: TopicArn or TargetArn Reason: no value for required parameter")
	_, err = (&PublishInput{TopicARN: "a", TargetARN: "b"}).Target()
	wantErr(t, err, CodeInvalidParameter, "Invalid parameter: TopicArn or TargetArn Reason: only one of them may be given")
}

func strAttr(typ, v string) MessageAttribute { return MessageAttribute{DataType: typ, StringValue: &v} }

func TestPublishValidate(t *testing.T) {
	std := TopicSettings{}
	fifo := TopicSettings{FIFO: true}
	fifoCBD := TopicSettings{FIFO: true, ContentBasedDeduplication: true}
	msg := func(m PublishMessage) PublishInput { return PublishInput{PublishMessage: m} }
	attrs := func(name string, a MessageAttribute) map[string]MessageAttribute {
		return map[string]MessageAttribute{name: a}
	}
	const pvi = CodeParameterValueInvalid

	valid := []struct {
		in PublishInput
		t  TopicSettings
	}{
		{msg(PublishMessage{Message: "m"}), std},
		{msg(PublishMessage{Message: "m", Subject: ptr(strings.Repeat("s", 99))}), std},
		{msg(PublishMessage{Message: "m", MessageGroupID: "g"}), std}, // fair queues
		{msg(PublishMessage{Message: "m", MessageGroupID: "g", MessageDeduplicationID: "d"}), fifo},
		{msg(PublishMessage{Message: "m", MessageGroupID: "g"}), fifoCBD},
		{msg(PublishMessage{Message: `{"default":"d","sqs":1}`, MessageStructure: "json"}), std},
		{msg(PublishMessage{Message: strings.Repeat("x", DefaultMaxMessageSize)}), std},
		{msg(PublishMessage{Message: strings.Repeat("x", DefaultMaxMessageSize+1)}), TopicSettings{MaxMessageSize: MaxMaximumMessageSize}},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("a.b-c_D9", strAttr("String.  prefixed.", "v"))}), std},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("n", strAttr("Number", "99.12"))}), std},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("b", MessageAttribute{DataType: "Binary", BinaryValue: []byte{1}})}), std},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("AWS.SNS.SMS.SMSType", strAttr("String", "Transactional"))}), std},
		{msg(PublishMessage{Message: "m", MessageGroupID: strings.Repeat("!", 128), MessageDeduplicationID: "~"}), fifo},
	}
	for _, tt := range valid {
		if err := tt.in.Validate(tt.t); err != nil {
			t.Errorf("Validate(%+v, %+v) = %v", tt.in.PublishMessage, tt.t, err)
		}
	}

	// Exactly at the limit, counting attribute names, types and values.
	a := attrs("name", strAttr("String", "value"))
	at := msg(PublishMessage{Message: strings.Repeat("x", DefaultMaxMessageSize-len("name")-len("String")-len("value")), MessageAttributes: a})
	if err := at.Validate(std); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	at.Message += "x"
	wantErr(t, at.Validate(std), CodeInvalidParameter, "Invalid parameter: Message too long")

	tests := []struct {
		in   PublishInput
		t    TopicSettings
		code Code
		msg  string
	}{
		{msg(PublishMessage{Message: "m", Subject: ptr("")}), std, CodeInvalidParameter, "Invalid parameter: Subject"},
		{msg(PublishMessage{Message: "m", Subject: ptr(strings.Repeat("s", 100))}), std, CodeInvalidParameter, "Invalid parameter: Subject"},
		{msg(PublishMessage{Message: "m", Subject: ptr("a\nb")}), std, CodeInvalidParameter, "Invalid parameter: Subject"},
		{msg(PublishMessage{Message: "m", Subject: ptr("a\x01b")}), std, CodeInvalidParameter, "Invalid parameter: Subject"},
		// Subject comes before the empty message.
		{msg(PublishMessage{Message: "", Subject: ptr("")}), std, CodeInvalidParameter, "Invalid parameter: Subject"},
		{msg(PublishMessage{Message: ""}), std, CodeInvalidParameter, "Invalid parameter: Empty message"},
		{msg(PublishMessage{Message: strings.Repeat("x", 1025)}), TopicSettings{MaxMessageSize: 1024}, CodeInvalidParameter, "Invalid parameter: Message too long"},
		{msg(PublishMessage{Message: "{", MessageStructure: "json"}), std, CodeInvalidParameter, "Invalid parameter: Message Structure - JSON message body failed to parse"},
		{msg(PublishMessage{Message: "null", MessageStructure: "json"}), std, CodeInvalidParameter, "Invalid parameter: Message Structure - JSON message body failed to parse"},
		{msg(PublishMessage{Message: `["default"]`, MessageStructure: "json"}), std, CodeInvalidParameter, "Invalid parameter: Message Structure - JSON message body failed to parse"},
		{msg(PublishMessage{Message: `{"sqs":"s"}`, MessageStructure: "json"}), std, CodeInvalidParameter, "Invalid parameter: Message Structure - No default entry in JSON message body"},
		{msg(PublishMessage{Message: `{"default":{"a":1}}`, MessageStructure: "json"}), std, CodeInvalidParameter, "Invalid parameter: Message Structure - No default entry in JSON message body"},
		{msg(PublishMessage{Message: "m", MessageStructure: "xml"}), std, CodeInvalidParameter, "Invalid parameter: MessageStructure"},
		{msg(PublishMessage{Message: "m"}), fifo, CodeInvalidParameter, "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"},
		{msg(PublishMessage{Message: "m", MessageDeduplicationID: "d"}), fifo, CodeInvalidParameter, "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"},
		{msg(PublishMessage{Message: "m", MessageGroupID: "g"}), fifo, CodeInvalidParameter, "Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"},
		{msg(PublishMessage{Message: "m", MessageDeduplicationID: "d"}), std, CodeInvalidParameter, "Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type"},
		{msg(PublishMessage{Message: "m", MessageGroupID: strings.Repeat("g", 129), MessageDeduplicationID: "d"}), fifo, CodeInvalidParameter, "Invalid parameter: MessageGroupId Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length."},
		{msg(PublishMessage{Message: "m", MessageGroupID: "g g"}), std, CodeInvalidParameter, "Invalid parameter: MessageGroupId Reason: MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length."},
		{msg(PublishMessage{Message: "m", MessageGroupID: "g", MessageDeduplicationID: "dé"}), fifo, CodeInvalidParameter, "Invalid parameter: MessageDeduplicationId Reason: MessageDeduplicationId can only include alphanumeric and punctuation characters. 1 to 128 in length."},

		// Message attributes (AWS 2024-11 wording).
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", strAttr("String.", "v"))}), std, pvi, "The message attribute 'attr1' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", strAttr("Stringprefixed", "v"))}), std, pvi, "The message attribute 'attr1' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", strAttr("string", "v"))}), std, pvi, "The message attribute 'attr1' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", strAttr("", "v"))}), std, pvi, "The message attribute 'attr1' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", MessageAttribute{DataType: "String"})}), std, pvi, "The message attribute 'attr1' must contain non-empty message attribute value for message attribute type 'String'."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", strAttr("Number", ""))}), std, pvi, "The message attribute 'attr1' must contain non-empty message attribute value for message attribute type 'Number'."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", MessageAttribute{DataType: "Binary", BinaryValue: []byte{}})}), std, pvi, "The message attribute 'attr1' must contain non-empty message attribute value for message attribute type 'Binary'."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", MessageAttribute{DataType: "String", BinaryValue: []byte{1}})}), std, pvi, "The message attribute 'attr1' with type 'String' must use field 'String'."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", strAttr("Binary", "AgME"))}), std, pvi, "The message attribute 'attr1' with type 'Binary' must use field 'Binary'."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("attr1", strAttr("Binary.x", "AgME"))}), std, pvi, "The message attribute 'attr1' with type 'Binary.x' must use field 'Binary'."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs(".a", strAttr("String", "v"))}), std, pvi, "Invalid message attribute name starting with character '.' was found."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("a.", strAttr("String", "v"))}), std, pvi, "Invalid message attribute name ending with character '.' was found."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("a..b", strAttr("String", "v"))}), std, pvi, "Message attribute name can not have successive '.' character."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("a b", strAttr("String", "v"))}), std, pvi, "Invalid non-alphanumeric character '#x20' was found in the message attribute name. Can only include alphanumeric characters, hyphens, underscores, or dots."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("aé", strAttr("String", "v"))}), std, pvi, "Invalid non-alphanumeric character '#xE9' was found in the message attribute name. Can only include alphanumeric characters, hyphens, underscores, or dots."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs(strings.Repeat("a", 257), strAttr("String", "v"))}), std, pvi, "Length of message attribute name must be less than 256 bytes."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("aws.x", strAttr("String", "v"))}), std, pvi, "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings are reserved for internal use."},
		{msg(PublishMessage{Message: "m", MessageAttributes: attrs("Amazon.x", strAttr("String", "v"))}), std, pvi, "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings are reserved for internal use."},
		// Attributes are checked before the size and in name order.
		{msg(PublishMessage{Message: strings.Repeat("x", DefaultMaxMessageSize+1), MessageAttributes: map[string]MessageAttribute{
			"b": strAttr("Bogus", "v"), "a": MessageAttribute{DataType: "String"},
		}}), std, pvi, "The message attribute 'a' must contain non-empty message attribute value for message attribute type 'String'."},
		// The size before the JSON structure, the structure before FIFO rules.
		{msg(PublishMessage{Message: "{" + strings.Repeat("x", DefaultMaxMessageSize), MessageStructure: "json"}), std, CodeInvalidParameter, "Invalid parameter: Message too long"},
		{msg(PublishMessage{Message: "{", MessageStructure: "json"}), fifo, CodeInvalidParameter, "Invalid parameter: Message Structure - JSON message body failed to parse"},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			wantErr(t, tt.in.Validate(tt.t), tt.code, tt.msg)
		})
	}
}

func TestPublishBatchValidate(t *testing.T) {
	entry := func(id string) PublishBatchEntry {
		return PublishBatchEntry{ID: id, PublishMessage: PublishMessage{Message: "m"}}
	}
	batch := func(es ...PublishBatchEntry) PublishBatchInput { return PublishBatchInput{TopicARN: "t", Entries: es} }
	eleven := make([]PublishBatchEntry, 11)
	for i := range eleven {
		eleven[i] = entry(fmt.Sprint("e", i))
	}
	ok := batch(entry("a"), entry("B-_9"), entry(strings.Repeat("x", 80)))
	if err := ok.Validate(TopicSettings{}); err != nil {
		t.Fatal(err)
	}

	big := func(id string, n int) PublishBatchEntry {
		return PublishBatchEntry{ID: id, PublishMessage: PublishMessage{Message: strings.Repeat("x", n)}}
	}
	// The summed size: exactly the limit passes, one byte more does not.
	if err := (&PublishBatchInput{Entries: []PublishBatchEntry{big("a", DefaultMaxMessageSize-1), big("b", 1)}}).Validate(TopicSettings{}); err != nil {
		t.Errorf("batch at the limit: %v", err)
	}

	fifoEntry := func(id, group, dedup string) PublishBatchEntry {
		return PublishBatchEntry{ID: id, PublishMessage: PublishMessage{Message: "m", MessageGroupID: group, MessageDeduplicationID: dedup}}
	}
	tests := []struct {
		in   PublishBatchInput
		t    TopicSettings
		code Code
		msg  string
	}{
		{batch(), TopicSettings{}, CodeEmptyBatchRequest, "The batch request doesn't contain any entries."},
		{batch(eleven...), TopicSettings{}, CodeTooManyEntriesInBatchRequest, "The batch request contains more entries than permissible."},
		{batch(entry("a"), entry("b"), entry("a")), TopicSettings{}, CodeBatchEntryIdsNotDistinct, "Two or more batch entries in the request have the same Id."},
		{batch(entry(strings.Repeat("x", 81))), TopicSettings{}, CodeInvalidBatchEntryID, "The Id of a batch entry in the batch request is too long: " + strings.Repeat("x", 81)},
		{batch(entry("a.b")), TopicSettings{}, CodeInvalidBatchEntryID, "The Id of a batch entry in the batch request contains an impermissible character: a.b"},
		{batch(entry("")), TopicSettings{}, CodeInvalidBatchEntryID, "The Id of a batch entry in the batch request contains an impermissible character: "},
		// Distinct ids are checked before their characters.
		{batch(entry("a.b"), entry("a.b")), TopicSettings{}, CodeBatchEntryIdsNotDistinct, "Two or more batch entries in the request have the same Id."},
		{batch(big("a", DefaultMaxMessageSize), big("b", 1)), TopicSettings{}, CodeBatchRequestTooLong, "The length of all the messages put together is more than the limit."},
		{batch(big("a", 600), big("b", 600)), TopicSettings{MaxMessageSize: 1024}, CodeBatchRequestTooLong, "The length of all the messages put together is more than the limit."},
		// Entry errors fail the whole request.
		{batch(fifoEntry("a", "g", "d"), fifoEntry("b", "", "d")), TopicSettings{FIFO: true}, CodeInvalidParameter, "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"},
		{batch(fifoEntry("a", "g", "")), TopicSettings{FIFO: true}, CodeInvalidParameter, "Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly"},
		{batch(fifoEntry("a", "", "d")), TopicSettings{}, CodeInvalidParameter, "Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type"},
		{batch(PublishBatchEntry{ID: "a", PublishMessage: PublishMessage{Message: `{"sqs":"x"}`, MessageStructure: "json"}}), TopicSettings{}, CodeInvalidParameter, "Invalid parameter: Message Structure - No default entry in JSON message body"},
		{batch(PublishBatchEntry{ID: "a", PublishMessage: PublishMessage{Message: "m", MessageAttributes: map[string]MessageAttribute{"x": strAttr("Int", "1")}}}), TopicSettings{}, CodeParameterValueInvalid, "The message attribute 'x' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String."},
		{batch(PublishBatchEntry{ID: "a"}), TopicSettings{}, CodeInvalidParameter, "Invalid parameter: Empty message"},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			wantErr(t, tt.in.Validate(tt.t), tt.code, tt.msg)
		})
	}
}

func TestParseTopicSettings(t *testing.T) {
	got := ParseTopicSettings(map[string]string{"FifoTopic": "true", "ContentBasedDeduplication": "true", "MaximumMessageSize": "2048", "SignatureVersion": "2"})
	want := TopicSettings{FIFO: true, ContentBasedDeduplication: true, MaxMessageSize: 2048, SignatureVersion: "2"}
	if got != want {
		t.Errorf("= %+v, want %+v", got, want)
	}
	if got := ParseTopicSettings(nil); got != (TopicSettings{}) || got.maxSize() != DefaultMaxMessageSize {
		t.Errorf("no attributes: %+v", got)
	}
}
