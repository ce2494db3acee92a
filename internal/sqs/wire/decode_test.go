package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
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
