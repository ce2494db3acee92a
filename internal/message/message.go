// Package message holds the rules of what a message may be: the
// characters of a body, the names and values of attributes, the ids of
// groups and deduplication, names of queues, and the one formula of a
// message's size; and the MD5s SQS answers with (body and attributes).
// The SQS front checks only the wire's shape; these are checked once, by
// the broker.
package message

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sluicemq/sluice/internal/ascii"
	st "github.com/sluicemq/sluice/sluicetype"
)

// ValidName reports whether s is 1 to max characters of A-Z, a-z, 0-9,
// '_' and '-', and also '.' when dot is set: the rule of queue names,
// batch entry ids, permission labels (no dot) and attribute names and
// data types (with dot). A loop, not a regular expression: batch ids are
// checked ten times a request.
func ValidName(s string, max int, dot bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || dot && c == '.') {
			return false
		}
	}
	return true
}

// ValidateQueueName checks a queue name: 1 to 80 characters of
// [A-Za-z0-9_-], and ".fifo" at the end of FIFO queues' names.
func ValidateQueueName(name string) error {
	base := strings.TrimSuffix(name, ".fifo")
	if !ValidName(base, 80, false) || len(name) > 80 {
		return st.Errorf(st.CodeInvalidParameterValue, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	return nil
}

// ValidBodyChars reports whether s holds only the characters SQS allows:
// #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF.
func ValidBodyChars(s string) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf { // one pass; ASCII without decoding
			if c < 0x20 && c != 0x9 && c != 0xA && c != 0xD {
				return false
			}
			i = max(i+1, ascii.Printable(s, i)) // plain text eight bytes at a time
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false // invalid UTF-8 (surrogates included)
		}
		if !(r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000) {
			return false
		}
		i += size
	}
	return true
}

// NewID is the message id made of 16 random bytes: a version 4 UUID.
func NewID(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	const hexd = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexd[c>>4], hexd[c&0xf])
	}
	return string(out)
}

// ValidID checks MessageGroupId / MessageDeduplicationId style values:
// 1-128 alphanumeric or punctuation characters.
func ValidID(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// InvalidIDErr is the error for a bad id in parameter param.
func InvalidIDErr(param, v string) error {
	return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter %s is invalid. Reason: %s can only include alphanumeric and punctuation characters. 1 to 128 in length.", v, param, param)
}

// CheckReceive checks a receive's parameters as SQS does and returns how
// many messages it asks for at most (MaxNumberOfMessages, 1 when not
// given).
func CheckReceive(in *st.ReceiveInput) (int, error) {
	max := in.MaxMessages
	if max == 0 {
		max = 1
	}
	if max < 1 || max > 10 {
		return 0, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", max)
	}
	if in.WaitTimeSeconds != nil && (*in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20) {
		return 0, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds)
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > 43200) {
		return 0, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *in.VisibilityTimeout)
	}
	if in.AttemptID != "" && !ValidID(in.AttemptID) {
		return 0, InvalidIDErr("ReceiveRequestAttemptId", in.AttemptID)
	}
	return max, nil
}

// MaxBatchBytes is the most a batch's messages may hold together.
const MaxBatchBytes = 1 << 20

// CheckBatch checks that a batch's messages hold at most MaxBatchBytes
// together (as Size counts them).
func CheckBatch(in []st.SendInput) error {
	total := 0
	for i := range in {
		total += Size(&in[i])
	}
	if total > MaxBatchBytes {
		return st.Errorf(st.CodeBatchRequestTooLong, "Batch requests cannot be longer than %d bytes. You have sent %d bytes.", MaxBatchBytes, total)
	}
	return nil
}

// Size is a message's size as SQS counts it against
// MaximumMessageSize and a batch's limit: the body and every attribute's
// name, type and values.
func Size(in *st.SendInput) int {
	size := len(in.Body)
	for name, a := range in.Attributes {
		size += len(name) + len(a.DataType)
		if a.StringValue != nil {
			size += len(*a.StringValue)
		}
		size += len(a.BinaryValue)
		for _, s := range a.StringListValues {
			size += len(s)
		}
		for _, b := range a.BinaryListValues {
			size += len(b)
		}
	}
	return size
}

// Validate checks one message against the queue's rules and returns
// its size as SQS counts it. batch selects the error codes SQS uses inside
// batches.
func Validate(in *st.SendInput, fifo, contentDedup bool, maxSize int, batch bool) error {
	if in.Body == "" {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter MessageBody.")
	}
	if !ValidBodyChars(in.Body) {
		return st.Errorf(st.CodeInvalidMessageContents, "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
	}
	if len(in.Attributes) > 10 {
		return st.Errorf(st.CodeInvalidParameterValue, "Number of message attributes [%d] exceeds the allowed maximum [10].", len(in.Attributes))
	}
	for name, a := range in.Attributes {
		if err := validateAttrName(name); err != nil {
			return err
		}
		if err := validateAttrValue(name, a); err != nil {
			return err
		}
	}
	if size := Size(in); size > maxSize {
		return st.Errorf(st.CodeInvalidParameterValue, "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", maxSize)
	}
	if in.DelaySeconds != nil {
		d := *in.DelaySeconds
		if d < 0 || d > 900 {
			return st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.", d)
		}
		if fifo && d != 0 {
			return st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", d)
		}
	}
	if in.TraceHeader != "" && !ValidBodyChars(in.TraceHeader) {
		return st.Errorf(st.CodeInvalidParameterValue, "Value for parameter AWSTraceHeader is invalid.")
	}
	if fifo {
		if in.GroupID == "" {
			code := st.CodeMissingParameter
			if batch {
				code = st.CodeInvalidParameterValue
			}
			return st.Errorf(code, "The request must contain the parameter MessageGroupId.")
		}
		if !ValidID(in.GroupID) {
			return InvalidIDErr("MessageGroupId", in.GroupID)
		}
		if in.DedupID == "" && !contentDedup {
			return st.Errorf(st.CodeInvalidParameterValue, "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		if in.DedupID != "" && !ValidID(in.DedupID) {
			return InvalidIDErr("MessageDeduplicationId", in.DedupID)
		}
	} else {
		if in.DedupID != "" {
			return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type.", in.DedupID)
		}
		if in.GroupID != "" && !ValidID(in.GroupID) {
			return InvalidIDErr("MessageGroupId", in.GroupID)
		}
	}
	return nil
}

func validateAttrName(name string) error {
	lower := strings.ToLower(name)
	if !ValidName(name, 256, true) || strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon.") ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return st.Errorf(st.CodeInvalidParameterValue, "Message (user) attribute name '%s' is invalid. Attribute names can contain alphanumeric characters, hyphens, underscores and periods; they cannot start with AWS. or Amazon., start or end with a period, or hold two periods in a row.", name)
	}
	return nil
}

func validateAttrValue(name string, a st.AttributeValue) error {
	base, _, _ := strings.Cut(a.DataType, ".")
	if a.DataType == "" {
		return st.Errorf(st.CodeInvalidParameterValue, "The message attribute '%s' must contain non-empty message attribute type.", name)
	}
	if !ValidName(a.DataType, 256, true) {
		return st.Errorf(st.CodeInvalidParameterValue, "The message attribute '%s' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.", name)
	}
	switch base {
	case "String", "Number":
		if a.StringValue == nil || *a.StringValue == "" {
			if len(a.StringListValues) > 0 {
				return nil
			}
			return st.Errorf(st.CodeInvalidParameterValue, "Message (user) attribute '%s' must contain a non-empty value of type '%s'.", name, base)
		}
		if !ValidBodyChars(*a.StringValue) {
			return st.Errorf(st.CodeInvalidParameterValue, "Message (user) attribute '%s' contains invalid characters.", name)
		}
		if base == "Number" && !isNumber(*a.StringValue) {
			return st.Errorf(st.CodeInvalidParameterValue, "Could not cast message attribute '%s' value to number.", name)
		}
	case "Binary":
		if len(a.BinaryValue) == 0 && len(a.BinaryListValues) == 0 {
			return st.Errorf(st.CodeInvalidParameterValue, "Message (user) attribute '%s' must contain a non-empty value of type 'Binary'.", name)
		}
	default:
		return st.Errorf(st.CodeInvalidParameterValue, "The message attribute '%s' has an invalid message attribute type, the set of supported type prefixes is Binary, Number, and String.", name)
	}
	return nil
}

// isNumber reports whether s is an SQS Number: an integer or decimal
// with an optional exponent, at most 38 significant digits, and a
// magnitude of zero or between 10^-128 and 10^126 (SQS's limits). 1e400
// is refused; it would overflow every consumer's float64.
func isNumber(s string) bool {
	s = strings.TrimSpace(s)
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" || !allDigits(digits) {
		return false
	}
	exp := 0
	if hasExp {
		e := strings.TrimPrefix(strings.TrimPrefix(expPart, "+"), "-")
		if e == "" || !allDigits(e) {
			return false
		}
		e = strings.TrimLeft(e, "0")
		if len(e) > 4 {
			return false // far beyond any allowed magnitude
		}
		for _, c := range e {
			exp = exp*10 + int(c-'0')
		}
		if strings.HasPrefix(expPart, "-") {
			exp = -exp
		}
	}
	sig := strings.TrimLeft(digits, "0")
	if sig == "" {
		return true // zero
	}
	lead := len(digits) - len(sig)
	if len(strings.TrimRight(sig, "0")) > 38 {
		return false
	}
	// The value is 0.d1d2... x 10^(point), with d1 its first significant
	// digit; in scientific form its exponent is point-1.
	sci := len(intPart) - lead - 1 + exp
	return sci >= -128 && sci <= 126
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// BodyMD5 is MD5OfMessageBody: the hex MD5 of the body's UTF-8 bytes.
func BodyMD5(body string) string {
	h := BodySum(body)
	return hex.EncodeToString(h[:])
}

// BodySum is the MD5 of the body's bytes, hashed through a small buffer
// on the stack: converting a body of up to 1 MiB to []byte would copy it.
func BodySum(body string) [md5.Size]byte {
	h := md5.New()
	var chunk [1024]byte
	for len(body) > 0 {
		n := copy(chunk[:], body)
		h.Write(chunk[:n])
		body = body[n:]
	}
	var sum [md5.Size]byte
	h.Sum(sum[:0])
	return sum
}

// AttributesMD5 is MD5OfMessageAttributes (and MD5OfMessageSystemAttributes)
// as AWS computes it: over the names in order, each with its data type and
// its value, length-prefixed; "" when there are no attributes.
func AttributesMD5(attrs map[string]st.AttributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf []byte
	put := func(b []byte) {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	for _, n := range names {
		a := attrs[n]
		put([]byte(n))
		put([]byte(a.DataType))
		switch {
		case a.StringValue != nil:
			buf = append(buf, 1)
			put([]byte(*a.StringValue))
		case a.BinaryValue != nil:
			buf = append(buf, 2)
			put(a.BinaryValue)
		case len(a.StringListValues) > 0:
			buf = append(buf, 3)
			for _, v := range a.StringListValues {
				put([]byte(v))
			}
		case len(a.BinaryListValues) > 0:
			buf = append(buf, 4)
			for _, v := range a.BinaryListValues {
				put(v)
			}
		}
	}
	h := md5.Sum(buf)
	return hex.EncodeToString(h[:])
}
