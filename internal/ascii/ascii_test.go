package ascii

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// slow is Printable (plain(c) for which bytes count) one byte at a time:
// whole words of eight plain bytes from i.
func slow(s string, i int, plain func(c byte) bool) int {
	for ; i+8 <= len(s); i += 8 {
		for j := i; j < i+8; j++ {
			if !plain(s[j]) {
				return i
			}
		}
	}
	return i
}

func printable(c byte) bool { return c >= 0x20 && c <= 0x7F }
func jsonPlain(c byte) bool { return printable(c) && c != '"' && c != '\\' }
func xmlPlain(c byte) bool  { return printable(c) && !strings.ContainsRune("\"&'<>", rune(c)) }

// Every byte value at every place of a plain word, and words of random
// bytes, give what a check of each byte gives.
func TestAgainstEachByte(t *testing.T) {
	base := strings.Repeat("abcdefgh", 4)
	for c := 0; c < 256; c++ {
		for at := 0; at < len(base); at++ {
			s := base[:at] + string([]byte{byte(c)}) + base[at+1:]
			for i := 0; i < 3; i++ {
				if got, want := Printable(s, i), slow(s, i, printable); got != want {
					t.Fatalf("Printable(%q, %d) = %d, want %d", s, i, got, want)
				}
				if got, want := JSONPlain(s, i), slow(s, i, jsonPlain); got != want {
					t.Fatalf("JSONPlain(%q, %d) = %d, want %d", s, i, got, want)
				}
				if got, want := XMLPlain(s, i), slow(s, i, xmlPlain); got != want {
					t.Fatalf("XMLPlain(%q, %d) = %d, want %d", s, i, got, want)
				}
				if got, want := JSONPlain([]byte(s), i), slow(s, i, jsonPlain); got != want {
					t.Fatalf("JSONPlain([]byte(%q), %d) = %d, want %d", s, i, got, want)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("\x00\x01\x1f\t\n\r !\"#&'<>\\/AZaz~\x7f\x80\xc3\xa9\xff")
	for n := 0; n < 200000; n++ {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = byte(0x20 + rng.IntN(0x60))
			}
		}
		s := string(b)
		if got, want := Printable(s, 0), slow(s, 0, printable); got != want {
			t.Fatalf("Printable(%q) = %d, want %d", s, got, want)
		}
		if got, want := JSONPlain(s, 0), slow(s, 0, jsonPlain); got != want {
			t.Fatalf("JSONPlain(%q) = %d, want %d", s, got, want)
		}
		if got, want := XMLPlain(s, 0), slow(s, 0, xmlPlain); got != want {
			t.Fatalf("XMLPlain(%q) = %d, want %d", s, got, want)
		}
		if got, want := JSONPlain(b, 0), slow(s, 0, jsonPlain); got != want {
			t.Fatalf("JSONPlain([]byte(%q)) = %d, want %d", s, got, want)
		}
	}
}

func BenchmarkPrintable(b *testing.B) {
	s := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23) // about 1 KiB
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if Printable(s, 0) < len(s)-8 {
			b.Fatal("not plain")
		}
	}
}

// BenchmarkJSONPlain: JSONPlain written out, beside Plain with the same
// exceptions (the general form) as the baseline of the same run.
func BenchmarkJSONPlain(b *testing.B) {
	s := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23))
	for _, c := range []struct {
		name string
		f    func([]byte, int) int
	}{{"JSONPlain", JSONPlain[[]byte]}, {"Plain", func(s []byte, i int) int { return Plain(s, i, "\"\\") }}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if c.f(s, 0) < len(s)-8 {
					b.Fatal("not plain")
				}
			}
		})
	}
}
