package sqs

import (
	"crypto/md5"
	"encoding/hex"

	"github.com/sluicemq/sluice/internal/message"
	st "github.com/sluicemq/sluice/sluicetype"
)

// md5Body is MD5OfMessageBody: the MD5 of the body's UTF-8 bytes.
func md5Body(body string) string {
	h := md5.Sum([]byte(body))
	return hex.EncodeToString(h[:])
}

// orMD5 is sum, the body's MD5 as the broker kept it, or else computed.
func orMD5(sum, body string) string {
	if sum != "" {
		return sum
	}
	return md5Body(body)
}

// md5Attrs is MD5OfMessageAttributes (and MD5OfMessageSystemAttributes) as
// AWS computes it; "" when there are no attributes.
func md5Attrs(attrs map[string]st.AttributeValue) string { return message.AttributesMD5(attrs) }
