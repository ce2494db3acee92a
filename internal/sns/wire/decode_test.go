package wire

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func mustForm(t *testing.T, body string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(body)
	if err != nil {
		t.Fatalf("ParseQuery(%q): %v", body, err)
	}
	return v
}

func ptr(s string) *string { return &s }

// TestDecodeBotocore decodes the exact forms botocore 1.29.27's serializer
// writes (shared/reference/sns-compat.md section 1.1), and the same
// requests as the other SDKs order them.
func TestDecodeBotocore(t *testing.T) {
	tests := []struct {
		name   string
		action string
		bodies []string // the same request, differently ordered
		want   any
	}{
		{
			name:   "CreateTopic fifo with attributes and tags",
			action: "CreateTopic",
			bodies: []string{
				"Action=CreateTopic&Version=2010-03-31&Name=t1.fifo" +
					"&Attributes.entry.1.key=FifoTopic&Attributes.entry.1.value=true" +
					"&Attributes.entry.2.key=ContentBasedDeduplication&Attributes.entry.2.value=true" +
					"&Tags.member.1.Key=k&Tags.member.1.Value=v",
				// aws-sdk-go-v2 sorts map entries by key; JS puts Action first.
				"Attributes.entry.1.key=ContentBasedDeduplication&Attributes.entry.1.value=true" +
					"&Attributes.entry.2.key=FifoTopic&Attributes.entry.2.value=true" +
					"&Tags.member.1.Value=v&Name=t1.fifo&Tags.member.1.Key=k&Action=CreateTopic&Version=2010-03-31",
			},
			want: CreateTopicInput{
				Name:       "t1.fifo",
				Attributes: map[string]string{"FifoTopic": "true", "ContentBasedDeduplication": "true"},
				Tags:       []Tag{{"k", "v"}},
			},
		},
		{
			name:   "Subscribe sqs",
			action: "Subscribe",
			bodies: []string{
				"Action=Subscribe&Version=2010-03-31&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1" +
					"&Protocol=sqs&Endpoint=arn%3Aaws%3Asqs%3Aus-east-1%3A000000000000%3Aq1" +
					"&Attributes.entry.1.key=RawMessageDelivery&Attributes.entry.1.value=true" +
					"&Attributes.entry.2.key=FilterPolicy&Attributes.entry.2.value=%7B%22a%22%3A%5B%22b%22%5D%7D" +
					"&ReturnSubscriptionArn=true",
				"ReturnSubscriptionArn=True&Attributes.entry.2.value=true&Attributes.entry.2.key=RawMessageDelivery" +
					"&Attributes.entry.1.value=%7B%22a%22%3A%5B%22b%22%5D%7D&Attributes.entry.1.key=FilterPolicy" +
					"&Endpoint=arn%3Aaws%3Asqs%3Aus-east-1%3A000000000000%3Aq1&Protocol=sqs" +
					"&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1",
			},
			want: SubscribeInput{
				TopicARN:              "arn:aws:sns:us-east-1:000000000000:t1",
				Protocol:              "sqs",
				Endpoint:              "arn:aws:sqs:us-east-1:000000000000:q1",
				Attributes:            map[string]string{"RawMessageDelivery": "true", "FilterPolicy": `{"a":["b"]}`},
				ReturnSubscriptionARN: true,
			},
		},
		{
			name:   "Publish with every attribute type",
			action: "Publish",
			bodies: []string{
				"Action=Publish&Version=2010-03-31&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1.fifo" +
					"&Message=hello+world&Subject=subj&MessageStructure=json&MessageGroupId=g1&MessageDeduplicationId=d1" +
					"&MessageAttributes.entry.1.Name=attr1&MessageAttributes.entry.1.Value.DataType=Number" +
					"&MessageAttributes.entry.1.Value.StringValue=99.12" +
					"&MessageAttributes.entry.2.Name=bin&MessageAttributes.entry.2.Value.DataType=Binary" +
					"&MessageAttributes.entry.2.Value.BinaryValue=AgME%2B%2F8%3D" +
					"&MessageAttributes.entry.3.Name=arr&MessageAttributes.entry.3.Value.DataType=String.Array" +
					"&MessageAttributes.entry.3.Value.StringValue=%5B%22a%22%2C1%5D",
				"MessageAttributes.entry.3.Value.StringValue=%5B%22a%22%2C1%5D&MessageAttributes.entry.3.Name=arr" +
					"&MessageAttributes.entry.3.Value.DataType=String.Array" +
					"&MessageAttributes.entry.1.Value.BinaryValue=AgME%2B%2F8%3D&MessageAttributes.entry.1.Name=bin" +
					"&MessageAttributes.entry.1.Value.DataType=Binary" +
					"&MessageAttributes.entry.2.Value.StringValue=99.12&MessageAttributes.entry.2.Name=attr1" +
					"&MessageAttributes.entry.2.Value.DataType=Number" +
					"&MessageDeduplicationId=d1&MessageGroupId=g1&MessageStructure=json&Subject=subj&Message=hello%20world" +
					"&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1.fifo&Version=2010-03-31&Action=Publish",
			},
			want: PublishInput{
				TopicARN: "arn:aws:sns:us-east-1:000000000000:t1.fifo",
				PublishMessage: PublishMessage{
					Message:          "hello world",
					Subject:          ptr("subj"),
					MessageStructure: "json",
					MessageAttributes: map[string]MessageAttribute{
						"attr1": {DataType: "Number", StringValue: ptr("99.12")},
						"bin":   {DataType: "Binary", BinaryValue: []byte{2, 3, 4, 0xfb, 0xff}},
						"arr":   {DataType: "String.Array", StringValue: ptr(`["a",1]`)},
					},
					MessageGroupID:         "g1",
					MessageDeduplicationID: "d1",
				},
			},
		},
		{
			name:   "Publish by TargetArn",
			action: "Publish",
			bodies: []string{"Action=Publish&TargetArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1&Message=m"},
			want: PublishInput{
				TargetARN:      "arn:aws:sns:us-east-1:000000000000:t1",
				PublishMessage: PublishMessage{Message: "m"},
			},
		},
		{
			name:   "PublishBatch",
			action: "PublishBatch",
			bodies: []string{
				"Action=PublishBatch&Version=2010-03-31&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1" +
					"&PublishBatchRequestEntries.member.1.Id=e1&PublishBatchRequestEntries.member.1.Message=m1" +
					"&PublishBatchRequestEntries.member.1.Subject=s1&PublishBatchRequestEntries.member.1.MessageStructure=json" +
					"&PublishBatchRequestEntries.member.1.MessageGroupId=g&PublishBatchRequestEntries.member.1.MessageDeduplicationId=d" +
					"&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Name=a" +
					"&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.DataType=String" +
					"&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.StringValue=x" +
					"&PublishBatchRequestEntries.member.2.Id=e2&PublishBatchRequestEntries.member.2.Message=m2",
				// Indices need not start at 1 or be contiguous: their order counts.
				"PublishBatchRequestEntries.member.9.Message=m2&PublishBatchRequestEntries.member.9.Id=e2" +
					"&PublishBatchRequestEntries.member.3.MessageAttributes.entry.5.Value.StringValue=x" +
					"&PublishBatchRequestEntries.member.3.MessageAttributes.entry.5.Value.DataType=String" +
					"&PublishBatchRequestEntries.member.3.MessageAttributes.entry.5.Name=a" +
					"&PublishBatchRequestEntries.member.3.MessageDeduplicationId=d&PublishBatchRequestEntries.member.3.MessageGroupId=g" +
					"&PublishBatchRequestEntries.member.3.MessageStructure=json&PublishBatchRequestEntries.member.3.Subject=s1" +
					"&PublishBatchRequestEntries.member.3.Message=m1&PublishBatchRequestEntries.member.3.Id=e1" +
					"&TopicArn=arn%3Aaws%3Asns%3Aus-east-1%3A000000000000%3At1&Action=PublishBatch",
			},
			want: PublishBatchInput{
				TopicARN: "arn:aws:sns:us-east-1:000000000000:t1",
				Entries: []PublishBatchEntry{
					{ID: "e1", PublishMessage: PublishMessage{
						Message: "m1", Subject: ptr("s1"), MessageStructure: "json",
						MessageGroupID: "g", MessageDeduplicationID: "d",
						MessageAttributes: map[string]MessageAttribute{"a": {DataType: "String", StringValue: ptr("x")}},
					}},
					{ID: "e2", PublishMessage: PublishMessage{Message: "m2"}},
				},
			},
		},
		{
			name:   "SetTopicAttributes",
			action: "SetTopicAttributes",
			bodies: []string{"Action=SetTopicAttributes&TopicArn=arn&AttributeName=DisplayName&AttributeValue=d"},
			want:   SetTopicAttributesInput{TopicARN: "arn", AttributeName: "DisplayName", AttributeValue: "d"},
		},
		{
			name:   "SetSubscriptionAttributes without a value",
			action: "SetSubscriptionAttributes",
			bodies: []string{"Action=SetSubscriptionAttributes&SubscriptionArn=s&AttributeName=FilterPolicy"},
			want:   SetSubscriptionAttributesInput{SubscriptionARN: "s", AttributeName: "FilterPolicy"},
		},
		{
			name:   "TagResource",
			action: "TagResource",
			bodies: []string{
				"Action=TagResource&ResourceArn=r&Tags.member.1.Key=k1&Tags.member.1.Value=v1&Tags.member.2.Key=k2&Tags.member.2.Value=",
				"Tags.member.2.Value=&Tags.member.2.Key=k2&Tags.member.1.Value=v1&Tags.member.1.Key=k1&ResourceArn=r&Action=TagResource",
			},
			want: TagResourceInput{ResourceARN: "r", Tags: []Tag{{"k1", "v1"}, {"k2", ""}}},
		},
		{
			name:   "UntagResource",
			action: "UntagResource",
			bodies: []string{
				"Action=UntagResource&ResourceArn=r&TagKeys.member.1=k1&TagKeys.member.2=k2",
				"TagKeys.member.2=k2&ResourceArn=r&TagKeys.member.1=k1",
			},
			want: UntagResourceInput{ResourceARN: "r", TagKeys: []string{"k1", "k2"}},
		},
		{
			name:   "ListTopics",
			action: "ListTopics",
			bodies: []string{"Action=ListTopics&NextToken=tok"},
			want:   ListTopicsInput{NextToken: "tok"},
		},
		{
			name:   "ListSubscriptions",
			action: "ListSubscriptions",
			bodies: []string{"Action=ListSubscriptions"},
			want:   ListSubscriptionsInput{},
		},
		{
			name:   "ListSubscriptionsByTopic",
			action: "ListSubscriptionsByTopic",
			bodies: []string{"Action=ListSubscriptionsByTopic&TopicArn=t&NextToken=n"},
			want:   ListSubscriptionsByTopicInput{TopicARN: "t", NextToken: "n"},
		},
		{
			name:   "DeleteTopic",
			action: "DeleteTopic",
			bodies: []string{"Action=DeleteTopic&TopicArn=t"},
			want:   DeleteTopicInput{TopicARN: "t"},
		},
		{
			name:   "GetTopicAttributes",
			action: "GetTopicAttributes",
			bodies: []string{"Action=GetTopicAttributes&TopicArn=t"},
			want:   GetTopicAttributesInput{TopicARN: "t"},
		},
		{
			name:   "ConfirmSubscription",
			action: "ConfirmSubscription",
			bodies: []string{"Action=ConfirmSubscription&TopicArn=t&Token=tok&AuthenticateOnUnsubscribe=true"},
			want:   ConfirmSubscriptionInput{TopicARN: "t", Token: "tok", AuthenticateOnUnsubscribe: "true"},
		},
		{
			name:   "Unsubscribe",
			action: "Unsubscribe",
			bodies: []string{"Action=Unsubscribe&SubscriptionArn=s"},
			want:   UnsubscribeInput{SubscriptionARN: "s"},
		},
		{
			name:   "GetSubscriptionAttributes",
			action: "GetSubscriptionAttributes",
			bodies: []string{"Action=GetSubscriptionAttributes&SubscriptionArn=s"},
			want:   GetSubscriptionAttributesInput{SubscriptionARN: "s"},
		},
		{
			name:   "ListTagsForResource",
			action: "ListTagsForResource",
			bodies: []string{"Action=ListTagsForResource&ResourceArn=r"},
			want:   ListTagsForResourceInput{ResourceARN: "r"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, body := range tt.bodies {
				got, err := Decode(tt.action, mustForm(t, body))
				if err != nil {
					t.Fatalf("Decode(%s): %v", body, err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Decode(%s)\n got %#v\nwant %#v", body, got, tt.want)
				}
			}
		})
	}
}

// TestDecodeEmptyLists: an empty list is sent as Param= (botocore and
// aws-sdk-go-v2), and that differs from no list at all where the list is
// required.
func TestDecodeEmptyLists(t *testing.T) {
	got, err := DecodeCreateTopic(mustForm(t, "Name=t&Tags=&Attributes="))
	if err != nil || got.Tags == nil || len(got.Tags) != 0 || got.Attributes != nil {
		t.Errorf("CreateTopic Tags=: %#v, %v", got, err)
	}
	tr, err := DecodeTagResource(mustForm(t, "ResourceArn=r&Tags="))
	if err != nil || len(tr.Tags) != 0 {
		t.Errorf("TagResource Tags=: %#v, %v", tr, err)
	}
	ut, err := DecodeUntagResource(mustForm(t, "ResourceArn=r&TagKeys="))
	if err != nil || len(ut.TagKeys) != 0 {
		t.Errorf("UntagResource TagKeys=: %#v, %v", ut, err)
	}
	pb, err := DecodePublishBatch(mustForm(t, "TopicArn=t&PublishBatchRequestEntries="))
	if err != nil || len(pb.Entries) != 0 {
		t.Fatalf("PublishBatch PublishBatchRequestEntries=: %#v, %v", pb, err)
	}
	wantErr(t, pb.CheckEntries(), CodeEmptyBatchRequest, "The batch request doesn't contain any entries.")
	p, err := DecodePublish(mustForm(t, "TopicArn=t&Message=m&MessageAttributes="))
	if err != nil || p.MessageAttributes != nil {
		t.Errorf("Publish MessageAttributes=: %#v, %v", p, err)
	}
}

// TestDecodeIndices: indices sort numerically, and an index with a
// leading zero or a non-digit is not an entry (so no two keys can name
// one entry and make the outcome depend on map order).
func TestDecodeIndices(t *testing.T) {
	got, err := DecodeUntagResource(mustForm(t, "ResourceArn=r&TagKeys.member.10=ten&TagKeys.member.2=two&TagKeys.member.01=zero-one&TagKeys.member.x=x&TagKeys.member.-1=neg&TagKeys.member.1234567890=big"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"two", "ten"}; !reflect.DeepEqual(got.TagKeys, want) {
		t.Errorf("TagKeys = %q, want %q", got.TagKeys, want)
	}
	// A later entry with the same map key replaces an earlier one.
	ct, err := DecodeCreateTopic(mustForm(t, "Name=t&Attributes.entry.2.key=A&Attributes.entry.2.value=second&Attributes.entry.1.key=A&Attributes.entry.1.value=first&Attributes.entry.3.value=nokey"))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"A": "second"}; !reflect.DeepEqual(ct.Attributes, want) {
		t.Errorf("Attributes = %v, want %v", ct.Attributes, want)
	}
}

func wantErr(t *testing.T, err error, code Code, msg string) {
	t.Helper()
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %v (%T), want %s %q", err, err, code, msg)
	}
	if e.Code != code || e.Message != msg {
		t.Errorf("error\n got %s %q\nwant %s %q", e.Code, e.Message, code, msg)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		action, body string
		code         Code
		msg          string
	}{
		{"CreateTopic", "", CodeValidationError,
			"1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null"},
		{"Subscribe", "Endpoint=e", CodeValidationError,
			"2 validation errors detected: Value null at 'topicArn' failed to satisfy constraint: Member must not be null; " +
				"Value null at 'protocol' failed to satisfy constraint: Member must not be null"},
		{"DeleteTopic", "", CodeValidationError,
			"1 validation error detected: Value null at 'topicArn' failed to satisfy constraint: Member must not be null"},
		{"GetTopicAttributes", "", CodeValidationError,
			"1 validation error detected: Value null at 'topicArn' failed to satisfy constraint: Member must not be null"},
		{"SetTopicAttributes", "TopicArn=t", CodeValidationError,
			"1 validation error detected: Value null at 'attributeName' failed to satisfy constraint: Member must not be null"},
		{"ConfirmSubscription", "TopicArn=t", CodeValidationError,
			"1 validation error detected: Value null at 'token' failed to satisfy constraint: Member must not be null"},
		{"Unsubscribe", "", CodeValidationError,
			"1 validation error detected: Value null at 'subscriptionArn' failed to satisfy constraint: Member must not be null"},
		{"GetSubscriptionAttributes", "", CodeValidationError,
			"1 validation error detected: Value null at 'subscriptionArn' failed to satisfy constraint: Member must not be null"},
		{"SetSubscriptionAttributes", "SubscriptionArn=s", CodeValidationError,
			"1 validation error detected: Value null at 'attributeName' failed to satisfy constraint: Member must not be null"},
		{"ListSubscriptionsByTopic", "", CodeValidationError,
			"1 validation error detected: Value null at 'topicArn' failed to satisfy constraint: Member must not be null"},
		{"ListTagsForResource", "", CodeValidationError,
			"1 validation error detected: Value null at 'resourceArn' failed to satisfy constraint: Member must not be null"},
		{"Publish", "TopicArn=t", CodeValidationError,
			"1 validation error detected: Value null at 'message' failed to satisfy constraint: Member must not be null"},
		// A missing DataType, as AWS words it (2024-11 snapshot).
		{"Publish", "TopicArn=t&Message=m&MessageAttributes.entry.1.Name=attr1&MessageAttributes.entry.1.Value.StringValue=v",
			CodeValidationError,
			"1 validation error detected: Value null at 'messageAttributes.attr1.member.dataType' failed to satisfy constraint: Member must not be null"},
		{"PublishBatch", "TopicArn=t&PublishBatchRequestEntries.member.1.Id=1&PublishBatchRequestEntries.member.1.Message=m" +
			"&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Name=attr1" +
			"&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.StringValue=v",
			CodeValidationError,
			"1 validation error detected: Value null at 'publishBatchRequestEntries.1.member.messageAttributes.attr1.member.dataType' failed to satisfy constraint: Member must not be null"},
		{"PublishBatch", "TopicArn=t", CodeValidationError,
			"1 validation error detected: Value null at 'publishBatchRequestEntries' failed to satisfy constraint: Member must not be null"},
		{"PublishBatch", "TopicArn=t&PublishBatchRequestEntries.member.1.Message=m&PublishBatchRequestEntries.member.2.Id=2",
			CodeValidationError,
			"2 validation errors detected: Value null at 'publishBatchRequestEntries.1.member.id' failed to satisfy constraint: Member must not be null; " +
				"Value null at 'publishBatchRequestEntries.2.member.message' failed to satisfy constraint: Member must not be null"},
		{"TagResource", "ResourceArn=r", CodeValidationError,
			"1 validation error detected: Value null at 'tags' failed to satisfy constraint: Member must not be null"},
		{"TagResource", "ResourceArn=r&Tags.member.1.Key=k", CodeValidationError,
			"1 validation error detected: Value null at 'tags.1.member.value' failed to satisfy constraint: Member must not be null"},
		{"TagResource", "ResourceArn=r&Tags.member.1.Key=&Tags.member.1.Value=v", CodeValidationError,
			"1 validation error detected: Value '' at 'tags.1.member.key' failed to satisfy constraint: Member must have length greater than or equal to 1"},
		{"CreateTopic", "Name=t&Tags.member.1.Key=" + strings.Repeat("k", 129) + "&Tags.member.1.Value=v", CodeValidationError,
			"1 validation error detected: Value '" + strings.Repeat("k", 129) + "' at 'tags.1.member.key' failed to satisfy constraint: Member must have length less than or equal to 128"},
		{"TagResource", "ResourceArn=r&Tags.member.1.Key=k&Tags.member.1.Value=" + strings.Repeat("v", 257), CodeValidationError,
			"1 validation error detected: Value '" + strings.Repeat("v", 257) + "' at 'tags.1.member.value' failed to satisfy constraint: Member must have length less than or equal to 256"},
		{"UntagResource", "ResourceArn=r", CodeValidationError,
			"1 validation error detected: Value null at 'tagKeys' failed to satisfy constraint: Member must not be null"},
		{"Publish", "TopicArn=t&Message=m&MessageAttributes.entry.1.Name=b&MessageAttributes.entry.1.Value.DataType=Binary&MessageAttributes.entry.1.Value.BinaryValue=%21%21",
			CodeInvalidParameterValue,
			"Value for parameter MessageAttributes.b.Value.BinaryValue is invalid. Reason: not valid base64."},
		{"Subscribe", "TopicArn=t&Protocol=sqs&ReturnSubscriptionArn=yes", CodeInvalidParameterValue,
			"Value (yes) for parameter ReturnSubscriptionArn is invalid. Must be a boolean value: true or false."},
		{"AddPermission", "", CodeInvalidAction, "Could not find operation AddPermission for version 2010-03-31"},
		{"", "", CodeMissingAction, "Missing Action"},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			got, err := Decode(tt.action, mustForm(t, tt.body))
			if err == nil {
				t.Fatalf("Decode(%s, %s) = %#v, want an error", tt.action, tt.body, got)
			}
			wantErr(t, err, tt.code, tt.msg)
		})
	}
}

// TestDecodeEmptyValues: an empty value is a value, not a missing member.
func TestDecodeEmptyValues(t *testing.T) {
	p, err := DecodePublish(mustForm(t, "TopicArn=t&Message=&Subject=&MessageAttributes.entry.1.Name=b&MessageAttributes.entry.1.Value.DataType=Binary&MessageAttributes.entry.1.Value.BinaryValue="))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject == nil || *p.Subject != "" {
		t.Errorf("Subject = %v, want a pointer to \"\"", p.Subject)
	}
	if b := p.MessageAttributes["b"].BinaryValue; b == nil || len(b) != 0 {
		t.Errorf("BinaryValue = %#v, want empty and non-nil", b)
	}
	// Unpadded base64 is read too.
	p, err = DecodePublish(mustForm(t, "Message=m&MessageAttributes.entry.1.Name=b&MessageAttributes.entry.1.Value.DataType=Binary&MessageAttributes.entry.1.Value.BinaryValue=AgM"))
	if err != nil || !reflect.DeepEqual(p.MessageAttributes["b"].BinaryValue, []byte{2, 3}) {
		t.Errorf("unpadded base64: %#v, %v", p.MessageAttributes, err)
	}
}
