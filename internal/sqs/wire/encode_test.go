package wire

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// appendJSONString quotes exactly as jsontext.AppendQuote: plain runs at
// every length and offset, each character that needs escaping, non-ASCII
// text and invalid UTF-8 after them.
func TestAppendJSONStringAsJSONText(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, _ := jsontext.AppendQuote([]byte("x"), s)
		if got := appendJSONString([]byte("x"), s); string(got) != string(want) {
			t.Fatalf("%q quoted as %s, want %s", s, got, want)
		}
	}
	tails := []string{"", "\"", "\\", "\x00", "\x1f", "\t\n\r", "\x7f", "é✓😀", "\u2028", "<&>", "\xff", "ok\xc3", "\xed\xa0\x80"}
	plain := "The quick brown fox jumps over the lazy dog"
	for n := 0; n <= len(plain); n++ {
		for _, tail := range tails {
			check(plain[:n] + tail)
			check(plain[:n] + tail + plain)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("\x00\x1f\t\"\\/ AZaz~\x7f\x80\xc3\xa9\xe2\x80\xa8\xff")
	for range 100000 {
		b := make([]byte, rng.IntN(48))
		for i := range b {
			if rng.IntN(6) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		check(string(b))
	}
}

// xmlText escapes exactly as xml.EscapeText.
func TestXMLTextAsEscapeText(t *testing.T) {
	check := func(s string) {
		t.Helper()
		var want, got bytes.Buffer
		_ = xml.EscapeText(&want, []byte(s))
		xmlText(&got, s)
		if got.String() != want.String() {
			t.Fatalf("%q escaped as %q, want %q", s, got.String(), want.String())
		}
	}
	tails := []string{"", "\"", "'", "&", "<", ">", "\x00", "\t\n\r", "\x7f", "é✓😀", "\xff", "ok\xc3", "\uFFFE"}
	plain := "The quick brown fox jumps over the lazy dog"
	for n := 0; n <= len(plain); n++ {
		for _, tail := range tails {
			check(plain[:n] + tail)
			check(plain[:n] + tail + plain)
		}
	}
}
