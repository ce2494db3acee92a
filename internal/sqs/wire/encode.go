package wire

import (
	"bytes"
	"encoding/xml"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/sluicemq/sluice/internal/ascii"
)

// The response model: an ordered tree that renders as JSON (AWS JSON 1.0)
// or as Query XML. Empty members are left out in both.

// Field is one member of an Obj: Val, or with Val nil the string Str (a
// string member kept out of an interface: boxing one is an allocation,
// and a response has several a message).
type Field struct {
	Name string
	Val  any // string, Num, Boolean, Obj, List, Mapv
	Str  string
}

// Obj is a structure: a JSON object, or XML elements in order.
type Obj []Field

// Num is an integer member.
type Num int64

// Boolean is a boolean member.
type Boolean bool

// List renders as a JSON array, or as repeated <Member> XML elements:
// Items, then Objs (objects kept out of interfaces, as Field.Str).
type List struct {
	Member string
	Items  []any
	Objs   []Obj
}

// Mapv renders as a JSON object, or as repeated <Entry><Key/><Val/></Entry>.
type Mapv struct {
	Entry, Key, Val string
	Keys            []string
	Vals            map[string]any
}

func (o Obj) Add(name string, v any) Obj { return append(o, Field{Name: name, Val: v}) }

// AddStr adds a string member unless it is empty (as Add would render it).
func (o Obj) AddStr(name, v string) Obj {
	if v == "" {
		return o
	}
	return append(o, Field{Name: name, Str: v})
}

// emptyField is whether f is left out.
func emptyField(f *Field) bool {
	if f.Val == nil {
		return f.Str == ""
	}
	return empty(f.Val)
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case Obj:
		return len(x) == 0
	case List:
		return len(x.Items) == 0 && len(x.Objs) == 0
	case Mapv:
		return len(x.Keys) == 0
	}
	return false
}

// renderJSON renders the response as JSON, members in the model's order.
func RenderJSON(o Obj) []byte { return AppendJSON(make([]byte, 0, 512), o) }

func AppendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case Obj:
		return appendJSONObj(b, x)
	case List:
		b = append(b, '[')
		for i, it := range x.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSON(b, it)
		}
		for i, o := range x.Objs {
			if i > 0 || len(x.Items) > 0 {
				b = append(b, ',')
			}
			b = appendJSONObj(b, o)
		}
		return append(b, ']')
	case Mapv:
		b = append(b, '{')
		for i, k := range x.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = AppendJSON(b, x.Vals[k])
		}
		return append(b, '}')
	case string:
		return appendJSONString(b, x)
	case Num:
		return strconv.AppendInt(b, int64(x), 10)
	case Boolean:
		return strconv.AppendBool(b, bool(x))
	}
	return append(b, "null"...) // nil; the model has no other types
}

func appendJSONObj(b []byte, o Obj) []byte {
	b = append(b, '{')
	n := 0
	for i := range o {
		f := &o[i]
		if emptyField(f) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendJSONString(b, f.Name)
		b = append(b, ':')
		if f.Val == nil {
			b = appendJSONString(b, f.Str)
		} else {
			b = AppendJSON(b, f.Val)
		}
	}
	return append(b, '}')
}

// appendJSONString quotes s; invalid UTF-8 becomes U+FFFD, as
// encoding/json does. A run of plain ASCII at its start (a message body
// is mostly one) is copied as it is, eight bytes checked at a time.
func appendJSONString(b []byte, s string) []byte {
	i := ascii.JSONPlain(s, 0)
	if i == 0 {
		b, _ = jsontext.AppendQuote(b, s)
		return b
	}
	b = append(append(b, '"'), s[:i]...)
	// The rest, quoted on its own, without its opening quote: s[:i] is
	// whole characters, so quoting the two apart is quoting s.
	at := len(b)
	b, _ = jsontext.AppendQuote(b, s[i:])
	return append(b[:at], b[at+1:]...)
}

func xmlText(buf *bytes.Buffer, s string) {
	// A run of plain ASCII at its start (a message body is mostly one) is
	// written as it is, eight bytes checked at a time; s[:i] is whole
	// characters, so escaping the rest apart is escaping s.
	i := ascii.XMLPlain(s, 0)
	buf.WriteString(s[:i])
	// xml.EscapeText writes CR as &#xD;, so parsers keep it.
	_ = xml.EscapeText(buf, []byte(s[i:]))
}

func renderXMLValue(buf *bytes.Buffer, name string, v any) {
	if empty(v) {
		return
	}
	switch x := v.(type) {
	case List:
		for _, it := range x.Items {
			renderXMLValue(buf, x.Member, it)
		}
		for _, o := range x.Objs {
			if len(o) > 0 { // as renderXMLValue leaves out an empty Obj
				renderXMLObj(buf, x.Member, o)
			}
		}
		return
	case Mapv:
		for _, k := range x.Keys {
			buf.WriteString("<" + x.Entry + "><" + x.Key + ">")
			xmlText(buf, k)
			buf.WriteString("</" + x.Key + ">")
			renderXMLValue(buf, x.Val, x.Vals[k])
			buf.WriteString("</" + x.Entry + ">")
		}
		return
	}
	if o, ok := v.(Obj); ok {
		renderXMLObj(buf, name, o)
		return
	}
	buf.WriteString("<" + name + ">")
	switch x := v.(type) {
	case string:
		xmlText(buf, x)
	case Num:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case Boolean:
		buf.WriteString(strconv.FormatBool(bool(x)))
	}
	buf.WriteString("</" + name + ">")
}

// renderXMLObj renders o as the element name.
func renderXMLObj(buf *bytes.Buffer, name string, o Obj) {
	buf.WriteString("<" + name + ">")
	for i := range o {
		if f := &o[i]; f.Val == nil {
			renderXMLString(buf, f.Name, f.Str)
		} else {
			renderXMLValue(buf, f.Name, f.Val)
		}
	}
	buf.WriteString("</" + name + ">")
}

func renderXMLString(buf *bytes.Buffer, name, s string) {
	if s == "" {
		return
	}
	buf.WriteString("<" + name + ">")
	xmlText(buf, s)
	buf.WriteString("</" + name + ">")
}

const xmlNS = "http://queue.amazonaws.com/doc/2012-11-05/"

// renderXML renders a Query response: <OpResponse><OpResult>…</OpResult>
// <ResponseMetadata/></OpResponse>. hasResult is false for operations
// without output, which carry only the metadata.
func RenderXML(op string, o Obj, hasResult bool, requestID string) []byte {
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

func RenderXMLError(typ, code, msg, requestID string) []byte {
	var buf bytes.Buffer
	buf.WriteString(`<?xml version="1.0"?>` + "\n")
	buf.WriteString("<ErrorResponse xmlns=\"" + xmlNS + "\"><Error><Type>" + typ + "</Type><Code>")
	xmlText(&buf, code)
	buf.WriteString("</Code><Message>")
	xmlText(&buf, msg)
	buf.WriteString("</Message><Detail/></Error><RequestId>" + requestID + "</RequestId></ErrorResponse>")
	return buf.Bytes()
}
