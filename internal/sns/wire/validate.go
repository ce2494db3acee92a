package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the SNS API.
const (
	// DefaultMaxMessageSize is a publish's size limit (message plus
	// attributes, in bytes) when the topic sets no MaximumMessageSize.
	DefaultMaxMessageSize = 262144
	// MinMaximumMessageSize and MaxMaximumMessageSize bound the
	// MaximumMessageSize topic attribute.
	MinMaximumMessageSize = 1024
	MaxMaximumMessageSize = 1048576
	// MaxBatchEntries is how many entries a PublishBatch may carry.
	MaxBatchEntries = 10
	// MaxRawAttributes is how many message attributes a raw delivery to
	// SQS may carry.
	MaxRawAttributes = 10
)

// TopicSettings are the topic attributes that decide how a publish is
// checked and delivered.
type TopicSettings struct {
	// FIFO is the FifoTopic attribute.
	FIFO bool
	// ContentBasedDeduplication is the topic attribute of that name (FIFO
	// topics only).
	ContentBasedDeduplication bool
	// MaxMessageSize is the MaximumMessageSize attribute in bytes; 0
	// means DefaultMaxMessageSize.
	MaxMessageSize int
	// SignatureVersion is "1" (SHA1withRSA, the default, also when "") or
	// "2" (SHA256withRSA).
	SignatureVersion string
}

// ParseTopicSettings reads the settings from a topic's stored
// attributes (as validated by CreateTopicInput.Validate and
// SetTopicAttributesInput.Validate).
func ParseTopicSettings(attrs map[string]string) TopicSettings {
	t := TopicSettings{
		FIFO:                      attrs["FifoTopic"] == "true",
		ContentBasedDeduplication: attrs["ContentBasedDeduplication"] == "true",
		SignatureVersion:          attrs["SignatureVersion"],
	}
	if n, err := strconv.Atoi(attrs["MaximumMessageSize"]); err == nil {
		t.MaxMessageSize = n
	}
	return t
}

func (t TopicSettings) maxSize() int {
	if t.MaxMessageSize <= 0 {
		return DefaultMaxMessageSize
	}
	return t.MaxMessageSize
}

// The prefixes of attribute errors: an attribute sent in a map
// (CreateTopic, Subscribe) is reported as "Attributes Reason: ", one sent
// alone (Set*Attributes) is not.
const (
	inMap   = "Invalid parameter: Attributes Reason: "
	inAlone = "Invalid parameter: "
)

// ValidateTopicName checks a topic name: 1 to 256 characters of
// [A-Za-z0-9_-], and for a FIFO topic the ".fifo" suffix on top, which
// only a FIFO topic may have. Anything else is InvalidParameter "Invalid
// parameter: Topic Name".
func ValidateTopicName(name string, fifo bool) error {
	base, hasSuffix := strings.CutSuffix(name, ".fifo")
	if len(name) > 256 || hasSuffix != fifo || !wordChars(base) {
		return InvalidParameter("Invalid parameter: Topic Name")
	}
	return nil
}

// FIFO reports whether the request creates a FIFO topic (FifoTopic=true,
// in any case).
func (in *CreateTopicInput) FIFO() bool { return strings.EqualFold(in.Attributes["FifoTopic"], "true") }

// Validate checks a CreateTopic request: the name against FifoTopic, each
// attribute (in name order), then the tags. It normalizes boolean
// attribute values to "true" or "false" in place. Whether a topic of that
// name exists with other attributes or tags is the caller's to check.
func (in *CreateTopicInput) Validate() error {
	fifo := in.FIFO()
	if err := ValidateTopicName(in.Name, fifo); err != nil {
		return err
	}
	for _, name := range sortedKeys(in.Attributes) {
		v, err := topicAttribute(inMap, name, in.Attributes[name], fifo, true)
		if err != nil {
			return err
		}
		in.Attributes[name] = v
	}
	return ValidateTags(in.Tags)
}

// Validate checks a SetTopicAttributes request against the topic's kind,
// normalizing a boolean value to "true" or "false". FifoTopic cannot be
// set after creation ("Invalid parameter: AttributeName").
func (in *SetTopicAttributesInput) Validate(topicFIFO bool) error {
	v, err := topicAttribute(inAlone, in.AttributeName, in.AttributeValue, topicFIFO, false)
	if err != nil {
		return err
	}
	in.AttributeValue = v
	return nil
}

// topicAttribute checks one topic attribute and returns its normalized
// value. Attribute values the server only stores (Policy, DeliveryPolicy,
// DisplayName, KmsMasterKeyId, ...) pass as sent.
func topicAttribute(prefix, name, value string, fifo, create bool) (string, error) {
	switch name {
	case "DisplayName", "Policy", "DeliveryPolicy", "KmsMasterKeyId":
		return value, nil
	case "FifoTopic":
		if !create {
			return "", InvalidParameter(inAlone + "AttributeName")
		}
		return booleanAttribute(prefix, name, value)
	case "ContentBasedDeduplication":
		v, err := booleanAttribute(prefix, name, value)
		if err == nil && v == "true" && !fifo {
			err = fifoOnly(prefix, name)
		}
		return v, err
	case "FifoThroughputScope":
		if value != "Topic" && value != "MessageGroup" {
			return "", InvalidParameter(prefix + name + ": Invalid value [" + value + "]. Please use either Topic or MessageGroup")
		}
		if !fifo {
			return "", fifoOnly(prefix, name)
		}
		return value, nil
	case "ArchivePolicy":
		if !fifo && value != "" {
			return "", fifoOnly(prefix, name)
		}
		return value, nil
	case "SignatureVersion":
		if value != "1" && value != "2" {
			return "", InvalidParameter(prefix + name + ": Invalid value [" + value + "]. Must be 1 or 2.")
		}
		return value, nil
	case "TracingConfig":
		if value != "PassThrough" && value != "Active" {
			return "", InvalidParameter(prefix + name + ": Invalid value [" + value + "]. Please use either PassThrough or Active")
		}
		return value, nil
	case "MaximumMessageSize":
		n, err := strconv.Atoi(value)
		if err != nil || n < MinMaximumMessageSize || n > MaxMaximumMessageSize {
			return "", InvalidParameter(fmt.Sprintf("%s%s: value provided is not an integer between %d-%d", prefix, name, MinMaximumMessageSize, MaxMaximumMessageSize))
		}
		return strconv.Itoa(n), nil
	}
	if proto, field, ok := feedbackAttribute(name); ok && proto != "" {
		if field == "SuccessFeedbackSampleRate" {
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 || n > 100 {
				return "", InvalidParameter(prefix + name + ": value provided is not an integer between 0-100")
			}
		}
		return value, nil
	}
	if create {
		return "", InvalidParameter(prefix + "AttributeName")
	}
	return "", InvalidParameter(inAlone + "AttributeName")
}

// feedbackAttribute splits the delivery status logging attributes,
// <Protocol>SuccessFeedbackRoleArn, <Protocol>SuccessFeedbackSampleRate
// and <Protocol>FailureFeedbackRoleArn.
func feedbackAttribute(name string) (protocol, field string, ok bool) {
	for _, f := range []string{"SuccessFeedbackRoleArn", "SuccessFeedbackSampleRate", "FailureFeedbackRoleArn"} {
		if p, found := strings.CutSuffix(name, f); found {
			switch p {
			case "HTTP", "Firehose", "Lambda", "Application", "SQS":
				return p, f, true
			}
		}
	}
	return "", "", false
}

func fifoOnly(prefix, name string) *Error {
	return InvalidParameter(prefix + name + ": The attribute is only supported for FIFO topics")
}

// booleanAttribute reads "true" or "false" in any case, as AWS does for
// RawMessageDelivery, and returns it in lower case.
func booleanAttribute(prefix, name, value string) (string, error) {
	switch v := strings.ToLower(value); v {
	case "true", "false":
		return v, nil
	}
	return "", InvalidParameter(prefix + name + ": Invalid value [" + value + "]. Must be true or false.")
}

// ValidateTags checks the tags of CreateTopic and TagResource: no key
// twice ("Invalid parameter: Duplicated keys are not allowed."). Key and
// value lengths were checked by Decode.
func ValidateTags(tags []Tag) error {
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		if seen[t.Key] {
			return InvalidParameter("Invalid parameter: Duplicated keys are not allowed.")
		}
		seen[t.Key] = true
	}
	return nil
}

// Validate checks a TagResource request's tags (see ValidateTags).
func (in *TagResourceInput) Validate() error { return ValidateTags(in.Tags) }

// isProtocol reports whether p is a protocol SNS knows.
func isProtocol(p string) bool {
	switch p {
	case "http", "https", "email", "email-json", "sms", "sqs", "application", "lambda", "firehose":
		return true
	}
	return false
}

// SubscriptionContext is what checking a subscription attribute needs to
// know of the subscription.
type SubscriptionContext struct {
	TopicFIFO bool
	Protocol  string
	Endpoint  string
}

// Validate checks a Subscribe request that needs no stored state but the
// topic's kind, in AWS's order: the protocol (one SNS knows; "sqs" only
// for a FIFO topic), the endpoint for it (an SQS queue ARN for "sqs"; no
// FIFO queue on a standard topic; a FIFO topic may deliver to a standard
// queue), then each attribute in name order, errors prefixed "Invalid
// parameter: Attributes Reason: ". RawMessageDelivery is normalized to
// "true" or "false" in place. FilterPolicy is not looked at here.
func (in *SubscribeInput) Validate(topicFIFO bool) error {
	if !isProtocol(in.Protocol) {
		return InvalidParameter("Invalid parameter: Amazon SNS does not support this protocol string: " + in.Protocol)
	}
	if topicFIFO && in.Protocol != "sqs" {
		return InvalidParameter("Invalid parameter: Invalid protocol type: " + in.Protocol)
	}
	switch in.Protocol {
	case "http", "https":
		if !strings.HasPrefix(in.Endpoint, in.Protocol+"://") {
			return InvalidParameter("Invalid parameter: Endpoint must match the specified protocol")
		}
	case "sqs":
		if _, err := ParseQueueARN(in.Endpoint); err != nil {
			return err
		}
		if IsFIFOQueueARN(in.Endpoint) && !topicFIFO {
			return InvalidParameter("Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard SNS topics")
		}
	}
	sc := SubscriptionContext{TopicFIFO: topicFIFO, Protocol: in.Protocol, Endpoint: in.Endpoint}
	for _, name := range sortedKeys(in.Attributes) {
		v, err := subscriptionAttribute(inMap, name, in.Attributes[name], sc)
		if err != nil {
			return err
		}
		in.Attributes[name] = v
	}
	return nil
}

// Validate checks a SetSubscriptionAttributes request against the
// subscription, errors prefixed "Invalid parameter: ", and normalizes
// RawMessageDelivery to "true" or "false". An empty FilterPolicy or
// RedrivePolicy removes it.
func (in *SetSubscriptionAttributesInput) Validate(sc SubscriptionContext) error {
	v, err := subscriptionAttribute(inAlone, in.AttributeName, in.AttributeValue, sc)
	if err != nil {
		return err
	}
	in.AttributeValue = v
	return nil
}

// subscriptionAttribute checks one subscription attribute and returns its
// normalized value.
func subscriptionAttribute(prefix, name, value string, sc SubscriptionContext) (string, error) {
	switch name {
	case "FilterPolicy", "DeliveryPolicy", "SubscriptionRoleArn":
		// FilterPolicy is filterpolicy's to check, the others are stored.
		return value, nil
	case "ReplayPolicy":
		if !sc.TopicFIFO {
			return "", InvalidParameter(prefix + "AttributeName")
		}
		return value, nil
	case "RawMessageDelivery":
		v, err := booleanAttribute(prefix, name, value)
		if err != nil {
			return "", err
		}
		switch sc.Protocol {
		case "sqs", "http", "https", "firehose":
		default:
			if v == "true" {
				return "", InvalidParameter(prefix + "Delivery protocol [" + sc.Protocol + "] does not support raw message delivery.")
			}
		}
		return v, nil
	case "FilterPolicyScope":
		if value != "MessageAttributes" && value != "MessageBody" {
			return "", InvalidParameter(prefix + "FilterPolicyScope: Invalid value [" + value + "]. Please use either MessageBody or MessageAttributes")
		}
		return value, nil
	case "RedrivePolicy":
		return value, redrivePolicy(prefix, value, sc)
	}
	return "", InvalidParameter(prefix + "AttributeName")
}

// redrivePolicy checks {"deadLetterTargetArn": "arn:aws:sqs:..."}; ""
// means no policy.
func redrivePolicy(prefix, value string, sc SubscriptionContext) error {
	if value == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		// AWS appends its JSON parser's own text, which no other parser
		// reproduces: ours stands in for it.
		return InvalidParameter(prefix + "RedrivePolicy: failed to parse JSON. " + err.Error())
	}
	obj, _ := v.(map[string]any)
	dlq, _ := obj["deadLetterTargetArn"].(string)
	a, ok := ParseARN(dlq)
	if !ok || a.Service != "sqs" {
		return InvalidParameter(prefix + "RedrivePolicy: deadLetterTargetArn is an invalid arn")
	}
	if sc.TopicFIFO && IsFIFOQueueARN(sc.Endpoint) && !IsFIFOQueueARN(a.Resource) {
		return InvalidParameter(prefix + "RedrivePolicy: must use a FIFO queue as DLQ for a FIFO Subscription to a FIFO Topic.")
	}
	return nil
}

// Target is the topic a Publish goes to: TopicArn, or TargetArn naming a
// topic. With neither, InvalidParameter "Invalid parameter: TopicArn or
// TargetArn Reason: no value for required parameter".
func (in *PublishInput) Target() (string, error) {
	switch {
	case in.TopicARN == "" && in.TargetARN == "":
		return "", InvalidParameter("Invalid parameter: TopicArn or TargetArn Reason: no value for required parameter")
	case in.TopicARN == "":
		return in.TargetARN, nil
	case in.TargetARN != "" && in.TargetARN != in.TopicARN:
		return "", InvalidParameter("Invalid parameter: TopicArn or TargetArn Reason: only one of them may be given")
	}
	return in.TopicARN, nil
}

// Validate checks a Publish against its topic's settings, in this order:
//
//  1. Subject: present but empty, 100 characters or more, or with a
//     control character: "Invalid parameter: Subject";
//  2. an empty Message: "Invalid parameter: Empty message";
//  3. each message attribute, in name order (name, DataType, value
//     field): ParameterValueInvalid with AWS's messages;
//  4. Size above the topic's limit: "Invalid parameter: Message too long";
//  5. MessageStructure=json: the Message must be a JSON object with a
//     string "default" member;
//  6. FIFO topic: MessageGroupId required, then MessageDeduplicationId
//     unless ContentBasedDeduplication; standard topic: no
//     MessageDeduplicationId (a MessageGroupId is allowed);
//  7. MessageGroupId and MessageDeduplicationId: 1 to 128 of ASCII
//     letters, digits and punctuation.
//
// A message attribute without a DataType was refused by Decode.
func (in *PublishInput) Validate(t TopicSettings) error {
	return validateMessage(&in.PublishMessage, t, true)
}

// Size is the message's size as SNS counts it against the limit: the
// UTF-8 bytes of Message plus, for each attribute, those of its name,
// DataType and value (a binary value's decoded bytes). Subject does not
// count.
func (m *PublishMessage) Size() int {
	n := len(m.Message)
	for name, a := range m.MessageAttributes {
		n += len(name) + len(a.DataType) + len(a.BinaryValue)
		if a.StringValue != nil {
			n += len(*a.StringValue)
		}
	}
	return n
}

func validateMessage(m *PublishMessage, t TopicSettings, checkSize bool) error {
	if m.Subject != nil && !validSubject(*m.Subject) {
		return InvalidParameter("Invalid parameter: Subject")
	}
	if m.Message == "" {
		return InvalidParameter("Invalid parameter: Empty message")
	}
	if err := validateMessageAttributes(m.MessageAttributes); err != nil {
		return err
	}
	if checkSize && m.Size() > t.maxSize() {
		return InvalidParameter("Invalid parameter: Message too long")
	}
	switch m.MessageStructure {
	case "":
	case "json":
		obj, err := structured(m.Message)
		if err != nil {
			return InvalidParameter("Invalid parameter: Message Structure - JSON message body failed to parse")
		}
		if _, ok := stringMember(obj, "default"); !ok {
			return InvalidParameter("Invalid parameter: Message Structure - No default entry in JSON message body")
		}
	default:
		return InvalidParameter("Invalid parameter: MessageStructure")
	}
	if t.FIFO {
		if m.MessageGroupID == "" {
			return InvalidParameter("Invalid parameter: The MessageGroupId parameter is required for FIFO topics")
		}
		if m.MessageDeduplicationID == "" && !t.ContentBasedDeduplication {
			return InvalidParameter("Invalid parameter: The topic should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
	} else if m.MessageDeduplicationID != "" {
		return InvalidParameter("Invalid parameter: MessageDeduplicationId Reason: The request includes MessageDeduplicationId parameter that is not valid for this topic type")
	}
	for _, p := range [...]struct{ name, value string }{
		{"MessageGroupId", m.MessageGroupID},
		{"MessageDeduplicationId", m.MessageDeduplicationID},
	} {
		if p.value != "" && !validMessageID(p.value) {
			return InvalidParameter("Invalid parameter: " + p.name + " Reason: " + p.name + " can only include alphanumeric and punctuation characters. 1 to 128 in length.")
		}
	}
	return nil
}

// validSubject: fewer than 100 characters of valid UTF-8, none a control
// character (line breaks included), and not empty.
func validSubject(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) >= 100 {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// validMessageID is the MessageGroupId / MessageDeduplicationId rule:
// 1 to 128 of ASCII letters, digits and punctuation (0x21-0x7E).
func validMessageID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// structured parses a MessageStructure=json message: a JSON object.
func structured(message string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(message), &obj); err != nil {
		return nil, err
	}
	if obj == nil { // the message was null
		return nil, fmt.Errorf("not a JSON object")
	}
	return obj, nil
}

// stringMember is obj's member key if it is a JSON string: a member of
// another type is ignored, as SNS ignores it.
func stringMember(obj map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := obj[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// validateMessageAttributes checks each attribute in name order with
// AWS's messages (ParameterValueInvalid).
func validateMessageAttributes(attrs map[string]MessageAttribute) error {
	for _, name := range sortedKeys(attrs) {
		a := attrs[name]
		if err := validateAttributeName(name); err != nil {
			return err
		}
		if !validDataType(a.DataType) {
			return Errorf(CodeParameterValueInvalid, "The message attribute '%s' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.", name)
		}
		field := "String"
		has, empty := a.StringValue != nil, a.StringValue == nil || *a.StringValue == ""
		if strings.HasPrefix(a.DataType, "Binary") {
			field = "Binary"
			has, empty = a.BinaryValue != nil, len(a.BinaryValue) == 0
		}
		switch {
		case a.StringValue == nil && a.BinaryValue == nil, has && empty:
			return Errorf(CodeParameterValueInvalid, "The message attribute '%s' must contain non-empty message attribute value for message attribute type '%s'.", name, a.DataType)
		case !has:
			return Errorf(CodeParameterValueInvalid, "The message attribute '%s' with type '%s' must use field '%s'.", name, a.DataType, field)
		}
	}
	return nil
}

// validateAttributeName: [A-Za-z0-9_.-], at most 256 bytes, no leading,
// trailing or doubled period, not a reserved AWS. / Amazon. name. The
// AWS.SNS. and AWS.MM. attributes SNS itself defines (SMS and mobile
// push settings) are accepted.
func validateAttributeName(name string) error {
	if len(name) > 256 {
		return Errorf(CodeParameterValueInvalid, "Length of message attribute name must be less than 256 bytes.")
	}
	if name == "" {
		return Errorf(CodeParameterValueInvalid, "The message attribute name must not be empty.")
	}
	if name[0] == '.' {
		return Errorf(CodeParameterValueInvalid, "Invalid message attribute name starting with character '.' was found.")
	}
	if name[len(name)-1] == '.' {
		return Errorf(CodeParameterValueInvalid, "Invalid message attribute name ending with character '.' was found.")
	}
	prev := rune(0)
	for _, r := range name {
		if !(r < utf8.RuneSelf && (r == '_' || r == '-' || r == '.' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')) {
			return Errorf(CodeParameterValueInvalid, "Invalid non-alphanumeric character '#x%X' was found in the message attribute name. Can only include alphanumeric characters, hyphens, underscores, or dots.", r)
		}
		if r == '.' && prev == '.' {
			return Errorf(CodeParameterValueInvalid, "Message attribute name can not have successive '.' character.")
		}
		prev = r
	}
	lower := strings.ToLower(name)
	if (strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.")) &&
		!strings.HasPrefix(name, "AWS.SNS.") && !strings.HasPrefix(name, "AWS.MM.") {
		return Errorf(CodeParameterValueInvalid, "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These strings are reserved for internal use.")
	}
	return nil
}

// validDataType: String, Number or Binary, alone or followed by "." and
// a label of at least one character, at most 256 bytes in all.
func validDataType(t string) bool {
	if len(t) > 256 {
		return false
	}
	for _, base := range [...]string{"String", "Number", "Binary"} {
		if rest, ok := strings.CutPrefix(t, base); ok {
			return rest == "" || len(rest) > 1 && rest[0] == '.'
		}
	}
	return false
}

// CheckEntries checks what a PublishBatch's entries must be as a whole,
// before the topic is looked at: at least one, at most MaxBatchEntries,
// distinct ids, each id at most 80 characters of [A-Za-z0-9_-]. Each is
// a whole-request error.
func (in *PublishBatchInput) CheckEntries() error {
	switch n := len(in.Entries); {
	case n == 0:
		return Errorf(CodeEmptyBatchRequest, "The batch request doesn't contain any entries.")
	case n > MaxBatchEntries:
		return Errorf(CodeTooManyEntriesInBatchRequest, "The batch request contains more entries than permissible.")
	}
	seen := make(map[string]bool, len(in.Entries))
	for _, e := range in.Entries {
		if seen[e.ID] {
			return Errorf(CodeBatchEntryIdsNotDistinct, "Two or more batch entries in the request have the same Id.")
		}
		seen[e.ID] = true
	}
	for _, e := range in.Entries {
		if utf8.RuneCountInString(e.ID) > 80 {
			return Errorf(CodeInvalidBatchEntryID, "The Id of a batch entry in the batch request is too long: %s", e.ID)
		}
		if !wordChars(e.ID) {
			return Errorf(CodeInvalidBatchEntryID, "The Id of a batch entry in the batch request contains an impermissible character: %s", e.ID)
		}
	}
	return nil
}

// Validate checks a PublishBatch against its topic's settings:
// CheckEntries, then each entry as Publish is checked (without the size
// check), then the entries' summed Size against the topic's limit
// (BatchRequestTooLong). Any failing entry fails the whole request, as on
// AWS: nothing lands in the Failed list for these.
func (in *PublishBatchInput) Validate(t TopicSettings) error {
	if err := in.CheckEntries(); err != nil {
		return err
	}
	total := 0
	for i := range in.Entries {
		m := &in.Entries[i].PublishMessage
		if err := validateMessage(m, t, false); err != nil {
			return err
		}
		total += m.Size()
	}
	if total > t.maxSize() {
		return Errorf(CodeBatchRequestTooLong, "The length of all the messages put together is more than the limit.")
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
