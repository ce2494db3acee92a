package sqs

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicemq/sluice/internal/sqs/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

// stdDecode is the reference for decodeJSON: encoding/json with UseNumber,
// and nothing but white space after the object.
func stdDecode(body []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var p map[string]any
	if err := dec.Decode(&p); err != nil {
		return nil, false
	}
	if len(bytes.Trim(body[dec.InputOffset():], " \t\r\n")) != 0 { // JSON's white space only
		return nil, false
	}
	if p == nil {
		p = map[string]any{}
	}
	return p, true
}

var jsonSeeds = []string{
	`{"QueueUrl":"q","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"AAE="}}}`,
	`{"Entries":[{"Id":"a","MessageBody":1,"DelaySeconds":"x"}]}`,
	`{"a":1,"a":2,"b":[1,-0,1e5,2.5E-3,true,false,null,{},[]],"c":"\u00e9\ud83d\ude00\n\t\"\\\/"}`,
	`{"bad":"\ud800","lone":"\udc00x","raw":"` + "\xff\xfe" + `"}`,
	`{"":"\ud800","":""}`, "{}\v", `null`, ` {} `, `{}{}`, `[1]`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `"x"`, `{"a":01}`, `{"a":1}x`,
}

// TestJSONDecodeMatchesEncodingJSON: decodeJSON accepts what encoding/json
// accepts (a single object) and yields the same values.
func TestJSONDecodeMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		checkJSONDecode(t, []byte(s))
	}
}

// TestJSONDecodeMutations: the seeds with bytes changed, inserted and
// removed at random (a JSON-heavy alphabet, escapes and multi-byte
// characters among it) decode as encoding/json reads them, or are refused
// as it refuses them.
func TestJSONDecodeMutations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 40))
	alphabet := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, `\u`, `\ud83d`, `\ude00`, `\n`, "0", "-", ".", "e", "+",
		"1", "true", "null", " ", "\t", "\x00", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82", "\xff", "a", "é", "😀", "\ufffd"}
	for n := 0; n < 100000; n++ {
		b := []byte(jsonSeeds[rng.IntN(len(jsonSeeds))])
		for range 1 + rng.IntN(3) {
			at := rng.IntN(len(b) + 1)
			ins := alphabet[rng.IntN(len(alphabet))]
			switch rng.IntN(3) {
			case 0: // insert
				b = append(b[:at:at], append([]byte(ins), b[at:]...)...)
			case 1: // remove
				if at < len(b) {
					b = append(b[:at:at], b[at+1:]...)
				}
			default: // replace
				if at < len(b) {
					b = append(b[:at:at], append([]byte(ins), b[at+1:]...)...)
				}
			}
		}
		checkJSONDecode(t, b)
		if t.Failed() {
			return
		}
	}
}

func FuzzJSONDecodeDifferential(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) { checkJSONDecode(t, []byte(body)) })
}

func checkJSONDecode(t *testing.T, body []byte) {
	t.Helper()
	if len(bytes.TrimSpace(body)) == 0 {
		return // both: no parameters
	}
	got, err := wire.DecodeJSON(body)
	want, ok := stdDecode(body)
	if !ok {
		if err == nil {
			t.Errorf("%q: decoded %v, encoding/json refuses it", body, got)
		}
		return
	}
	var e *st.Error
	if errors.As(err, &e) && e.Code == st.CodeInvalidMessageContents {
		// encoding/json replaces invalid UTF-8 and lone surrogates with
		// U+FFFD; decodeJSON refuses them.
		if !anyReplaced(body) {
			t.Errorf("%q: refused as %v, but encoding/json reads %v with nothing replaced", body, err, want)
		}
		return
	}
	if err != nil {
		t.Errorf("%q: %v, encoding/json reads %v", body, err, want)
		return
	}
	if !reflect.DeepEqual(got.Generic(), want) {
		t.Errorf("%q: decoded %#v, encoding/json %#v", body, got, want)
	}
}

// anyReplaced reports whether encoding/json replaces something in one of
// body's strings with U+FFFD, names and values overwritten by a later
// duplicate name included.
func anyReplaced(body []byte) bool {
	d := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.ContainsRune(s, utf8.RuneError) {
			return true
		}
	}
}

// TestRenderJSON: the response writer's output is JSON that encoding/json
// reads back as the model says: empty members left out, lists, maps,
// numbers, booleans, and strings with quotes, control characters and
// invalid UTF-8.
// TestJSONRefusesWhatItCannotKeep: invalid UTF-8 and lone surrogate
// escapes are refused as InvalidMessageContents (not replaced, which would
// store a body whose MD5 differs from the client's), and a body that would
// decode to far more values or depth than any request has is refused
// before it takes memory.
func TestJSONRefusesWhatItCannotKeep(t *testing.T) {
	many := "{\"x\":[" + strings.Repeat("0,", wire.MaxJSONValues) + "0]}"
	deep := "{\"x\":" + strings.Repeat("[", wire.MaxJSONDepth+1) + strings.Repeat("]", wire.MaxJSONDepth+1) + "}"
	for body, code := range map[string]st.Code{
		`{"MessageBody":"a` + "\xff" + `b"}`: st.CodeInvalidMessageContents,
		`{"MessageBody":"\ud800"}`:           st.CodeInvalidMessageContents,
		`{"MessageBody":"x\udc00"}`:          st.CodeInvalidMessageContents,
		many:                                 wire.CodeMalformedInput,
		deep:                                 wire.CodeMalformedInput,
	} {
		_, err := wire.DecodeJSON([]byte(body))
		var e *st.Error
		if !errors.As(err, &e) || e.Code != code {
			t.Errorf("%.60q: %v, want %s", body, err, code)
		}
	}
	p, err := wire.DecodeJSON([]byte(`{"MessageBody":"\ud83d\ude00 \uFFFD"}`))
	if body, _ := p.Str("MessageBody"); err != nil || body != "😀 \uFFFD" {
		t.Errorf("a surrogate pair and U+FFFD itself: %q %v", body, err)
	}
}

func TestRenderJSON(t *testing.T) {
	o := wire.Obj{}.Add("Id", "a\"b\\c\n\x01é😀").Add("Empty", "").Add("N", wire.Num(-42)).Add("B", wire.Boolean(true)).
		Add("L", wire.List{Member: "m", Items: []any{wire.Obj{}.Add("X", "1"), wire.Obj{}}}).
		Add("EmptyList", wire.List{Member: "m"}).
		Add("M", wire.Mapv{Entry: "e", Key: "k", Val: "v", Keys: []string{"z", "a"}, Vals: map[string]any{"z": "1", "a": wire.Obj{}.Add("Y", wire.Num(2))}}).
		Add("Bad", "x\xffy")
	var got map[string]any
	raw := wire.RenderJSON(o)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	want := map[string]any{"Id": "a\"b\\c\n\x01é😀", "N": -42.0, "B": true,
		"L": []any{map[string]any{"X": "1"}, map[string]any{}},
		"M": map[string]any{"z": "1", "a": map[string]any{"Y": 2.0}}, "Bad": "x\uFFFDy"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rendered %s\nread back %#v\nwant %#v", raw, got, want)
	}
}
