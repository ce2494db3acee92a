package wire

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// The decoded requests: one input type per action, fields named as in
// the SNS model (with Go's initialisms). Decoding checks only what the
// model's request validation checks (required members, the tag length
// bounds, the value types); the service's own rules are each input's
// Validate, and those that need stored state are the server's.

// Tag is one resource tag.
type Tag struct {
	Key   string
	Value string
}

// MessageAttribute is one message attribute of a publish. DataType is
// String, Number, Binary or one of those with a custom ".label" suffix
// (String.Array included). StringValue is nil when absent; BinaryValue is
// nil when absent and non-nil (maybe empty) when sent, decoded from
// base64.
type MessageAttribute struct {
	DataType    string
	StringValue *string
	BinaryValue []byte
}

// CreateTopicInput is a CreateTopic request.
type CreateTopicInput struct {
	Name       string
	Attributes map[string]string
	Tags       []Tag
	// DataProtectionPolicy is kept as sent.
	DataProtectionPolicy string
}

// DeleteTopicInput is a DeleteTopic request.
type DeleteTopicInput struct{ TopicARN string }

// ListTopicsInput is a ListTopics request.
type ListTopicsInput struct{ NextToken string }

// GetTopicAttributesInput is a GetTopicAttributes request.
type GetTopicAttributesInput struct{ TopicARN string }

// SetTopicAttributesInput is a SetTopicAttributes request: one attribute.
// An absent AttributeValue is "".
type SetTopicAttributesInput struct {
	TopicARN       string
	AttributeName  string
	AttributeValue string
}

// SubscribeInput is a Subscribe request.
type SubscribeInput struct {
	TopicARN              string
	Protocol              string
	Endpoint              string
	Attributes            map[string]string
	ReturnSubscriptionARN bool
}

// ConfirmSubscriptionInput is a ConfirmSubscription request.
type ConfirmSubscriptionInput struct {
	TopicARN string
	Token    string
	// AuthenticateOnUnsubscribe is kept as sent ("true" or "false").
	AuthenticateOnUnsubscribe string
}

// UnsubscribeInput is an Unsubscribe request.
type UnsubscribeInput struct{ SubscriptionARN string }

// ListSubscriptionsInput is a ListSubscriptions request.
type ListSubscriptionsInput struct{ NextToken string }

// ListSubscriptionsByTopicInput is a ListSubscriptionsByTopic request.
type ListSubscriptionsByTopicInput struct {
	TopicARN  string
	NextToken string
}

// GetSubscriptionAttributesInput is a GetSubscriptionAttributes request.
type GetSubscriptionAttributesInput struct{ SubscriptionARN string }

// SetSubscriptionAttributesInput is a SetSubscriptionAttributes request:
// one attribute. An absent AttributeValue is "".
type SetSubscriptionAttributesInput struct {
	SubscriptionARN string
	AttributeName   string
	AttributeValue  string
}

// PublishMessage is what Publish and each PublishBatch entry share: one
// message.
type PublishMessage struct {
	Message string
	// Subject is nil when absent; an empty Subject is an error, unlike an
	// absent one.
	Subject *string
	// MessageStructure is "json" or "" (a plain message).
	MessageStructure       string
	MessageAttributes      map[string]MessageAttribute
	MessageGroupID         string
	MessageDeduplicationID string
}

// PublishInput is a Publish request. TargetARN may name a topic and then
// acts as TopicARN (see Target).
type PublishInput struct {
	TopicARN  string
	TargetARN string
	PublishMessage
}

// PublishBatchEntry is one entry of a PublishBatch request.
type PublishBatchEntry struct {
	ID string
	PublishMessage
}

// PublishBatchInput is a PublishBatch request, its entries in index
// order.
type PublishBatchInput struct {
	TopicARN string
	Entries  []PublishBatchEntry
}

// TagResourceInput is a TagResource request.
type TagResourceInput struct {
	ResourceARN string
	Tags        []Tag
}

// UntagResourceInput is an UntagResource request.
type UntagResourceInput struct {
	ResourceARN string
	TagKeys     []string
}

// ListTagsForResourceInput is a ListTagsForResource request.
type ListTagsForResourceInput struct{ ResourceARN string }

// Decode decodes the parameters of one SNS Query request (the body's
// form merged with the URL's query, Action and Version included) into the
// action's input type: CreateTopicInput for "CreateTopic", and so on for
// the 17 actions this package speaks. Another action is InvalidAction.
//
// Flattened parameters are read in the three forms the SDKs send, in any
// order: maps as X.entry.N.key / X.entry.N.value (message attributes as
// MessageAttributes.entry.N.Name / .Value.DataType / .Value.StringValue /
// .Value.BinaryValue), lists as X.member.N (structures as
// X.member.N.Field), and an empty list as X= with an empty value. Entries
// are taken in the order of N; an N that is not a decimal number without
// leading zeros is ignored, as are unknown parameters.
//
// A missing required member is ValidationError, all of them in one
// message ("2 validation errors detected: Value null at 'topicArn' failed
// to satisfy constraint: Member must not be null; ...").
func Decode(action string, form url.Values) (any, error) {
	switch action {
	case "CreateTopic":
		return DecodeCreateTopic(form)
	case "DeleteTopic":
		return DecodeDeleteTopic(form)
	case "ListTopics":
		return DecodeListTopics(form)
	case "GetTopicAttributes":
		return DecodeGetTopicAttributes(form)
	case "SetTopicAttributes":
		return DecodeSetTopicAttributes(form)
	case "Subscribe":
		return DecodeSubscribe(form)
	case "ConfirmSubscription":
		return DecodeConfirmSubscription(form)
	case "Unsubscribe":
		return DecodeUnsubscribe(form)
	case "ListSubscriptions":
		return DecodeListSubscriptions(form)
	case "ListSubscriptionsByTopic":
		return DecodeListSubscriptionsByTopic(form)
	case "GetSubscriptionAttributes":
		return DecodeGetSubscriptionAttributes(form)
	case "SetSubscriptionAttributes":
		return DecodeSetSubscriptionAttributes(form)
	case "Publish":
		return DecodePublish(form)
	case "PublishBatch":
		return DecodePublishBatch(form)
	case "TagResource":
		return DecodeTagResource(form)
	case "UntagResource":
		return DecodeUntagResource(form)
	case "ListTagsForResource":
		return DecodeListTagsForResource(form)
	case "":
		return nil, Errorf(CodeMissingAction, "Missing Action")
	}
	return nil, Errorf(CodeInvalidAction, "Could not find operation %s for version %s", action, Version)
}

// DecodeCreateTopic decodes a CreateTopic request.
func DecodeCreateTopic(v url.Values) (CreateTopicInput, error) {
	var d decoder
	in := CreateTopicInput{
		Name:                 d.required(v, "Name", "name"),
		Attributes:           stringMap(v, "Attributes"),
		Tags:                 d.tags(v, "Tags", "tags"),
		DataProtectionPolicy: str(v, "DataProtectionPolicy"),
	}
	return in, d.err()
}

// DecodeDeleteTopic decodes a DeleteTopic request.
func DecodeDeleteTopic(v url.Values) (DeleteTopicInput, error) {
	var d decoder
	in := DeleteTopicInput{TopicARN: d.required(v, "TopicArn", "topicArn")}
	return in, d.err()
}

// DecodeListTopics decodes a ListTopics request.
func DecodeListTopics(v url.Values) (ListTopicsInput, error) {
	return ListTopicsInput{NextToken: str(v, "NextToken")}, nil
}

// DecodeGetTopicAttributes decodes a GetTopicAttributes request.
func DecodeGetTopicAttributes(v url.Values) (GetTopicAttributesInput, error) {
	var d decoder
	in := GetTopicAttributesInput{TopicARN: d.required(v, "TopicArn", "topicArn")}
	return in, d.err()
}

// DecodeSetTopicAttributes decodes a SetTopicAttributes request.
func DecodeSetTopicAttributes(v url.Values) (SetTopicAttributesInput, error) {
	var d decoder
	in := SetTopicAttributesInput{
		TopicARN:       d.required(v, "TopicArn", "topicArn"),
		AttributeName:  d.required(v, "AttributeName", "attributeName"),
		AttributeValue: str(v, "AttributeValue"),
	}
	return in, d.err()
}

// DecodeSubscribe decodes a Subscribe request.
func DecodeSubscribe(v url.Values) (SubscribeInput, error) {
	var d decoder
	in := SubscribeInput{
		TopicARN:   d.required(v, "TopicArn", "topicArn"),
		Protocol:   d.required(v, "Protocol", "protocol"),
		Endpoint:   str(v, "Endpoint"),
		Attributes: stringMap(v, "Attributes"),
	}
	in.ReturnSubscriptionARN = d.boolean(v, "ReturnSubscriptionArn")
	return in, d.err()
}

// DecodeConfirmSubscription decodes a ConfirmSubscription request.
func DecodeConfirmSubscription(v url.Values) (ConfirmSubscriptionInput, error) {
	var d decoder
	in := ConfirmSubscriptionInput{
		TopicARN:                  d.required(v, "TopicArn", "topicArn"),
		Token:                     d.required(v, "Token", "token"),
		AuthenticateOnUnsubscribe: str(v, "AuthenticateOnUnsubscribe"),
	}
	return in, d.err()
}

// DecodeUnsubscribe decodes an Unsubscribe request.
func DecodeUnsubscribe(v url.Values) (UnsubscribeInput, error) {
	var d decoder
	in := UnsubscribeInput{SubscriptionARN: d.required(v, "SubscriptionArn", "subscriptionArn")}
	return in, d.err()
}

// DecodeListSubscriptions decodes a ListSubscriptions request.
func DecodeListSubscriptions(v url.Values) (ListSubscriptionsInput, error) {
	return ListSubscriptionsInput{NextToken: str(v, "NextToken")}, nil
}

// DecodeListSubscriptionsByTopic decodes a ListSubscriptionsByTopic
// request.
func DecodeListSubscriptionsByTopic(v url.Values) (ListSubscriptionsByTopicInput, error) {
	var d decoder
	in := ListSubscriptionsByTopicInput{
		TopicARN:  d.required(v, "TopicArn", "topicArn"),
		NextToken: str(v, "NextToken"),
	}
	return in, d.err()
}

// DecodeGetSubscriptionAttributes decodes a GetSubscriptionAttributes
// request.
func DecodeGetSubscriptionAttributes(v url.Values) (GetSubscriptionAttributesInput, error) {
	var d decoder
	in := GetSubscriptionAttributesInput{SubscriptionARN: d.required(v, "SubscriptionArn", "subscriptionArn")}
	return in, d.err()
}

// DecodeSetSubscriptionAttributes decodes a SetSubscriptionAttributes
// request.
func DecodeSetSubscriptionAttributes(v url.Values) (SetSubscriptionAttributesInput, error) {
	var d decoder
	in := SetSubscriptionAttributesInput{
		SubscriptionARN: d.required(v, "SubscriptionArn", "subscriptionArn"),
		AttributeName:   d.required(v, "AttributeName", "attributeName"),
		AttributeValue:  str(v, "AttributeValue"),
	}
	return in, d.err()
}

// DecodePublish decodes a Publish request.
func DecodePublish(v url.Values) (PublishInput, error) {
	var d decoder
	in := PublishInput{
		TopicARN:       str(v, "TopicArn"),
		TargetARN:      str(v, "TargetArn"),
		PublishMessage: d.message(v, ""),
	}
	return in, d.err()
}

// DecodePublishBatch decodes a PublishBatch request.
func DecodePublishBatch(v url.Values) (PublishBatchInput, error) {
	var d decoder
	in := PublishBatchInput{TopicARN: d.required(v, "TopicArn", "topicArn")}
	entries := members(v, "PublishBatchRequestEntries.member")
	if len(entries) == 0 && !v.Has("PublishBatchRequestEntries") {
		d.null("publishBatchRequestEntries")
	}
	in.Entries = make([]PublishBatchEntry, len(entries))
	for i, ev := range entries {
		path := fmt.Sprintf("publishBatchRequestEntries.%d.member.", i+1)
		in.Entries[i].ID = d.required(ev, "Id", path+"id")
		in.Entries[i].PublishMessage = d.message(ev, path)
	}
	return in, d.err()
}

// DecodeTagResource decodes a TagResource request.
func DecodeTagResource(v url.Values) (TagResourceInput, error) {
	var d decoder
	in := TagResourceInput{ResourceARN: d.required(v, "ResourceArn", "resourceArn")}
	in.Tags = d.tags(v, "Tags", "tags")
	if in.Tags == nil && !v.Has("Tags") {
		d.null("tags")
	}
	return in, d.err()
}

// DecodeUntagResource decodes an UntagResource request.
func DecodeUntagResource(v url.Values) (UntagResourceInput, error) {
	var d decoder
	in := UntagResourceInput{ResourceARN: d.required(v, "ResourceArn", "resourceArn")}
	for i, m := range members(v, "TagKeys.member") {
		if k, ok := get(m, ""); ok {
			in.TagKeys = append(in.TagKeys, k)
		} else {
			d.null(fmt.Sprintf("tagKeys.%d.member", i+1))
		}
	}
	if in.TagKeys == nil && !v.Has("TagKeys") {
		d.null("tagKeys")
	}
	return in, d.err()
}

// DecodeListTagsForResource decodes a ListTagsForResource request.
func DecodeListTagsForResource(v url.Values) (ListTagsForResourceInput, error) {
	var d decoder
	in := ListTagsForResourceInput{ResourceARN: d.required(v, "ResourceArn", "resourceArn")}
	return in, d.err()
}

// decoder collects what the model's request validation refuses: every
// violation is reported at once, as that layer does, under the member's
// path ("publishBatchRequestEntries.1.member.id").
type decoder struct {
	violations []string
	// malformed is the first value that could not be read at all (bad
	// base64, a boolean that is not one); it is reported alone.
	malformed *Error
}

func (d *decoder) null(path string) {
	d.violations = append(d.violations, "Value null at '"+path+"' failed to satisfy constraint: Member must not be null")
}

func (d *decoder) length(value, path string, lo, hi int) {
	switch n := len([]rune(value)); {
	case n < lo:
		d.violations = append(d.violations, fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must have length greater than or equal to %d", value, path, lo))
	case n > hi:
		d.violations = append(d.violations, fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", value, path, hi))
	}
}

func (d *decoder) err() error {
	if d.malformed != nil {
		return d.malformed
	}
	switch len(d.violations) {
	case 0:
		return nil
	case 1:
		return Errorf(CodeValidationError, "1 validation error detected: %s", d.violations[0])
	}
	return Errorf(CodeValidationError, "%d validation errors detected: %s", len(d.violations), strings.Join(d.violations, "; "))
}

// get is the first value of key and whether the key was sent.
func get(v url.Values, key string) (string, bool) {
	vs, ok := v[key]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

func str(v url.Values, key string) string {
	s, _ := get(v, key)
	return s
}

// required is the value of a required member; its absence is recorded
// under path. An empty value is a value: the service's rules judge it.
func (d *decoder) required(v url.Values, key, path string) string {
	s, ok := get(v, key)
	if !ok {
		d.null(path)
	}
	return s
}

// boolean reads a boolean member ("true" or "false", any case); absent is
// false.
func (d *decoder) boolean(v url.Values, key string) bool {
	s, ok := get(v, key)
	switch {
	case !ok, strings.EqualFold(s, "false"):
		return false
	case strings.EqualFold(s, "true"):
		return true
	}
	if d.malformed == nil {
		d.malformed = Errorf(CodeInvalidParameterValue, "Value (%s) for parameter %s is invalid. Must be a boolean value: true or false.", s, key)
	}
	return false
}

// tags reads a list of tags. Key and Value are both required by the
// model, Key 1-128 characters, Value 0-256.
func (d *decoder) tags(v url.Values, key, path string) []Tag {
	ms := members(v, key+".member")
	if len(ms) == 0 {
		if v.Has(key) {
			return []Tag{}
		}
		return nil
	}
	tags := make([]Tag, len(ms))
	for i, m := range ms {
		p := fmt.Sprintf("%s.%d.member.", path, i+1)
		k, hasKey := get(m, "Key")
		val, hasVal := get(m, "Value")
		if !hasKey {
			d.null(p + "key")
		} else {
			d.length(k, p+"key", 1, 128)
		}
		if !hasVal {
			d.null(p + "value")
		} else {
			d.length(val, p+"value", 0, 256)
		}
		tags[i] = Tag{Key: k, Value: val}
	}
	return tags
}

// message reads the members of one message (Publish, or a batch entry
// whose members are under path).
func (d *decoder) message(v url.Values, path string) PublishMessage {
	m := PublishMessage{
		Message:                d.required(v, "Message", path+"message"),
		MessageStructure:       str(v, "MessageStructure"),
		MessageGroupID:         str(v, "MessageGroupId"),
		MessageDeduplicationID: str(v, "MessageDeduplicationId"),
	}
	if s, ok := get(v, "Subject"); ok {
		m.Subject = &s
	}
	m.MessageAttributes = d.messageAttributes(v, path)
	return m
}

// messageAttributes reads MessageAttributes.entry.N.{Name, Value.DataType,
// Value.StringValue, Value.BinaryValue}. An entry without a Name is
// ignored; a later entry with the same Name replaces an earlier one.
func (d *decoder) messageAttributes(v url.Values, path string) map[string]MessageAttribute {
	ms := members(v, "MessageAttributes.entry")
	if len(ms) == 0 {
		return nil
	}
	attrs := make(map[string]MessageAttribute, len(ms))
	for _, m := range ms {
		name, ok := get(m, "Name")
		if !ok {
			continue
		}
		var a MessageAttribute
		if a.DataType, ok = get(m, "Value.DataType"); !ok {
			// The wording AWS uses: the map key in the path, and the
			// value's members addressed as the map's "member".
			d.null(path + "messageAttributes." + name + ".member.dataType")
		}
		if s, ok := get(m, "Value.StringValue"); ok {
			a.StringValue = &s
		}
		if s, ok := get(m, "Value.BinaryValue"); ok {
			b, err := decodeBase64(s)
			if err != nil && d.malformed == nil {
				d.malformed = Errorf(CodeInvalidParameterValue, "Value for parameter MessageAttributes.%s.Value.BinaryValue is invalid. Reason: not valid base64.", name)
			}
			a.BinaryValue = b
		}
		attrs[name] = a
	}
	return attrs
}

// decodeBase64 decodes standard base64, padded or not. The result is
// non-nil, so an empty value stays distinct from an absent one.
func decodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(s)
	}
	if b == nil {
		b = []byte{}
	}
	return b, err
}

// stringMap reads a map sent as prefix.entry.N.key / prefix.entry.N.value
// (nil when there is none). An entry without a key is ignored, one
// without a value maps to "".
func stringMap(v url.Values, prefix string) map[string]string {
	ms := members(v, prefix+".entry")
	if len(ms) == 0 {
		return nil
	}
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		if k, ok := get(m, "key"); ok {
			out[k] = str(m, "value")
		}
	}
	return out
}

// members groups the keys prefix.N[.rest] by N, in increasing order of
// N: each group maps rest to its values ("" for prefix.N itself).
func members(v url.Values, prefix string) []url.Values {
	p := prefix + "."
	var byIndex map[int]url.Values
	for k, vs := range v {
		rest, ok := strings.CutPrefix(k, p)
		if !ok {
			continue
		}
		idx, sub, _ := strings.Cut(rest, ".")
		n, ok := index(idx)
		if !ok {
			continue
		}
		if byIndex == nil {
			byIndex = map[int]url.Values{}
		}
		g := byIndex[n]
		if g == nil {
			g = url.Values{}
			byIndex[n] = g
		}
		g[sub] = vs
	}
	if len(byIndex) == 0 {
		return nil
	}
	idxs := make([]int, 0, len(byIndex))
	for n := range byIndex {
		idxs = append(idxs, n)
	}
	slices.Sort(idxs)
	out := make([]url.Values, len(idxs))
	for i, n := range idxs {
		out[i] = byIndex[n]
	}
	return out
}

// index parses a list index: 1 to 9 decimal digits without a leading
// zero (so two spellings never name one entry), or "0".
func index(s string) (int, bool) {
	if s == "" || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
