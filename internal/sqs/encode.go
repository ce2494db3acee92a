package sqs

import (
	"bytes"
	"encoding/xml"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// The response model: an ordered tree that renders as JSON (AWS JSON 1.0)
// or as Query XML. Empty members are left out in both.

type field struct {
	name string
	val  any // string, num, boolean, obj, list, mapv
}

type obj []field

type num int64

type boolean bool

// list renders as a JSON array, or as repeated <member> XML elements.
type list struct {
	member string
	items  []any
}

// mapv renders as a JSON object, or as repeated <entry><key/><val/></entry>.
type mapv struct {
	entry, key, val string
	keys            []string
	vals            map[string]any
}

func (o obj) add(name string, v any) obj { return append(o, field{name, v}) }

// addStr adds a string member unless it is empty.
func (o obj) addStr(name, v string) obj {
	if v == "" {
		return o
	}
	return append(o, field{name, v})
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case obj:
		return len(x) == 0
	case list:
		return len(x.items) == 0
	case mapv:
		return len(x.keys) == 0
	}
	return false
}

// renderJSON renders the response as JSON, members in the model's order.
func renderJSON(o obj) []byte { return appendJSON(make([]byte, 0, 512), o) }

func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case obj:
		b = append(b, '{')
		n := 0
		for _, f := range x {
			if empty(f.val) {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = appendJSONString(b, f.name)
			b = append(b, ':')
			b = appendJSON(b, f.val)
		}
		return append(b, '}')
	case list:
		b = append(b, '[')
		for i, it := range x.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, it)
		}
		return append(b, ']')
	case mapv:
		b = append(b, '{')
		for i, k := range x.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSON(b, x.vals[k])
		}
		return append(b, '}')
	case string:
		return appendJSONString(b, x)
	case num:
		return strconv.AppendInt(b, int64(x), 10)
	case boolean:
		return strconv.AppendBool(b, bool(x))
	}
	return append(b, "null"...) // nil; the model has no other types
}

// appendJSONString quotes s; invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

func xmlText(buf *bytes.Buffer, s string) {
	// xml.EscapeText writes CR as &#xD;, so parsers keep it.
	_ = xml.EscapeText(buf, []byte(s))
}

func renderXMLValue(buf *bytes.Buffer, name string, v any) {
	if empty(v) {
		return
	}
	switch x := v.(type) {
	case list:
		for _, it := range x.items {
			renderXMLValue(buf, x.member, it)
		}
		return
	case mapv:
		for _, k := range x.keys {
			buf.WriteString("<" + x.entry + "><" + x.key + ">")
			xmlText(buf, k)
			buf.WriteString("</" + x.key + ">")
			renderXMLValue(buf, x.val, x.vals[k])
			buf.WriteString("</" + x.entry + ">")
		}
		return
	}
	buf.WriteString("<" + name + ">")
	switch x := v.(type) {
	case obj:
		for _, f := range x {
			renderXMLValue(buf, f.name, f.val)
		}
	case string:
		xmlText(buf, x)
	case num:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case boolean:
		buf.WriteString(strconv.FormatBool(bool(x)))
	}
	buf.WriteString("</" + name + ">")
}

const xmlNS = "http://queue.amazonaws.com/doc/2012-11-05/"

// renderXML renders a Query response: <OpResponse><OpResult>…</OpResult>
// <ResponseMetadata/></OpResponse>. hasResult is false for operations
// without output, which carry only the metadata.
func renderXML(op string, o obj, hasResult bool, requestID string) []byte {
	var buf bytes.Buffer
	buf.WriteString(`<?xml version="1.0"?>` + "\n")
	buf.WriteString("<" + op + "Response xmlns=\"" + xmlNS + "\">")
	if hasResult {
		if len(o) == 0 {
			buf.WriteString("<" + op + "Result/>")
		} else {
			renderXMLValue(&buf, op+"Result", o)
		}
	}
	buf.WriteString("<ResponseMetadata><RequestId>" + requestID + "</RequestId></ResponseMetadata>")
	buf.WriteString("</" + op + "Response>")
	return buf.Bytes()
}

func renderXMLError(typ, code, msg, requestID string) []byte {
	var buf bytes.Buffer
	buf.WriteString(`<?xml version="1.0"?>` + "\n")
	buf.WriteString("<ErrorResponse xmlns=\"" + xmlNS + "\"><Error><Type>" + typ + "</Type><Code>")
	xmlText(&buf, code)
	buf.WriteString("</Code><Message>")
	xmlText(&buf, msg)
	buf.WriteString("</Message><Detail/></Error><RequestId>" + requestID + "</RequestId></ErrorResponse>")
	return buf.Bytes()
}
