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

// TestDecodeJSONBatch: the benchmark's body decodes to what encoding/json
// reads, names from the table and escaped strings included.
func TestDecodeJSONBatch(t *testing.T) {
	for _, body := range [][]byte{batchBody(), []byte(`{"Entri\u0065s":["a\"b","\u00e9",{"Id":""}],"Id":"x\\y"}`)} {
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
		if !reflect.DeepEqual(map[string]any(got), want) {
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
