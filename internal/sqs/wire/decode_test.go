package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	st "github.com/sluicemq/sluice/sluicetype"
)

// batchBody is a SendMessageBatch of ten 1 KiB messages with an attribute
// each, as the lean bench sends them.
func batchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"QueueUrl":"http://127.0.0.1:9324/000000000000/bench","Entries":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"Id":"m%d","MessageBody":%q,"MessageAttributes":{"sent":{"DataType":"Number","StringValue":"1764950400%03d"}}}`,
			i, strings.Repeat("x", 1024), i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestDecodeJSONBatch: the benchmark's body, and bodies of every kind of
// value, decode to what encoding/json reads: names from the table,
// escaped strings, duplicate names (the last value kept, in small objects
// and large ones), empty objects and arrays, numbers as sent.
func TestDecodeJSONBatch(t *testing.T) {
	var large strings.Builder
	large.WriteString(`{"A":{`)
	for i := range 40 {
		fmt.Fprintf(&large, `"k%d":%d,`, i%25, i)
	}
	large.WriteString(`"k0":"last"}}`)
	for _, body := range [][]byte{
		batchBody(),
		[]byte(`{"Entri\u0065s":["a\"b","\u00e9",{"Id":""}],"Id":"x\\y"}`),
		[]byte(`{"Id":"a","N":-1.5e3,"T":true,"F":false,"Z":null,"E":{},"L":[],"Id":"b","O":{"x":[1,[2,{"y":null}]],"x":{}}}`),
		[]byte(large.String()),
	} {
		got, err := DecodeJSON(body)
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		var want map[string]any
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Generic(), want) {
			t.Fatalf("decoded %v, encoding/json %v", got, want)
		}
	}
}

// BenchmarkDecodeJSON decodes a SendMessageBatch body, with encoding/json
// into an any beside it as the baseline of the same run.
func BenchmarkDecodeJSON(b *testing.B) {
	body := batchBody()
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := DecodeJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			d := json.NewDecoder(bytes.NewReader(body))
			d.UseNumber()
			var v map[string]any
			if err := d.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestParamsAccess: each accessor's answer for absent, null, empty and
// wrongly typed members, as the actions rely on (nil for absent or null,
// empty for {} and [], BadType for the wrong kind of value or item).
func TestParamsAccess(t *testing.T) {
	p, err := DecodeJSON([]byte(`{"S":"x","N":7,"B":true,"Z":null,"E":[],"O":{},"L":["a","b"],
		"LN":["a",1],"LO":[{"Id":"1"},{}],"LX":[{"Id":"1"},"x"],"M":{"a":"1","b":2,"c":false},"MZ":{"a":null},
		"A":{"k":{"DataType":"String","StringValue":"v"}},"AX":{"k":"v"},"I":" 12 ","IX":"1.5"}`))
	if err != nil {
		t.Fatal(err)
	}
	bad := func(what string, err error) {
		t.Helper()
		var e *st.Error
		if !errors.As(err, &e) || e.Code != st.CodeInvalidParameterValue {
			t.Errorf("%s: %v, want InvalidParameterValue", what, err)
		}
	}
	for name, want := range map[string]string{"S": "x", "N": "7", "B": "true", "Z": "", "absent": ""} {
		if got, err := p.Str(name); err != nil || got != want {
			t.Errorf("Str(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	_, err = p.Str("O")
	bad("Str of an object", err)
	_, err = p.Required("Z")
	if e := (*st.Error)(nil); !errors.As(err, &e) || e.Code != st.CodeMissingParameter {
		t.Errorf("Required of null: %v, want MissingParameter", err)
	}
	if !p.Has("Z") || p.Has("absent") {
		t.Error("Has: null is there, absent is not")
	}
	if n, err := p.Intp("I"); err != nil || n == nil || *n != 12 {
		t.Errorf("Intp(I) = %v, %v", n, err)
	}
	if n, err := p.Intp("Z"); err != nil || n != nil {
		t.Errorf("Intp(Z) = %v, %v; want nil", n, err)
	}
	_, err = p.Intp("IX")
	bad("Intp of 1.5", err)
	_, err = p.Intp("B")
	bad("Intp of a boolean", err)

	if l, err := p.StrList("L"); err != nil || !reflect.DeepEqual(l, []string{"a", "b"}) {
		t.Errorf("StrList(L) = %v, %v", l, err)
	}
	if l, err := p.StrList("E"); err != nil || l == nil || len(l) != 0 {
		t.Errorf("StrList of [] = %#v, %v; want empty, not nil", l, err)
	}
	if l, err := p.StrList("Z"); err != nil || l != nil {
		t.Errorf("StrList of null = %#v, %v; want nil", l, err)
	}
	_, err = p.StrList("LN")
	bad("StrList with a number", err)
	_, err = p.StrList("S")
	bad("StrList of a string", err)

	if es, err := p.Entries("LO"); err != nil || len(es) != 2 || es[0].Has("Id") != true || es[1].Has("Id") {
		t.Errorf("Entries(LO) = %v, %v", es, err)
	}
	_, err = p.Entries("LX")
	bad("Entries with a string", err)

	if m, err := p.StrMap("M"); err != nil || !reflect.DeepEqual(m, map[string]string{"a": "1", "b": "2", "c": "false"}) {
		t.Errorf("StrMap(M) = %v, %v", m, err)
	}
	if m, err := p.StrMap("O"); err != nil || m == nil || len(m) != 0 {
		t.Errorf("StrMap of {} = %#v, %v; want empty, not nil", m, err)
	}
	_, err = p.StrMap("MZ")
	bad("StrMap with null", err)
	_, err = p.StrMap("L")
	bad("StrMap of a list", err)

	if a, err := p.MsgAttrs("A"); err != nil || a["k"].DataType != "String" || a["k"].StringValue == nil || *a["k"].StringValue != "v" {
		t.Errorf("MsgAttrs(A) = %v, %v", a, err)
	}
	_, err = p.MsgAttrs("AX")
	bad("MsgAttrs with a string", err)
}
