package sqs

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"sort"

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
func md5Attrs(attrs map[string]st.AttributeValue) string {
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
