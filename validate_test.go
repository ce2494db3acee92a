package sluice

import (
	"testing"
	"unicode/utf8"
)

// refBodyChars is the rule as the SQS documentation states it, written
// plainly: valid UTF-8 of #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
// #x10000-#x10FFFF.
func refBodyChars(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

var bodySeeds = []string{"", "plain", "tab\tcr\rlf\n", "nul\x00", "bell\x07", "del\x7f", "é✓😀", "\uFFFD", "\uFFFE",
	"\uFFFF", "\uE000", "\uD7FF", "\xed\xa0\x80" /* a surrogate */, "\xff", "ok\xc3", "\U0010FFFF", "\xf4\x90\x80\x80"}

func TestValidBodyChars(t *testing.T) {
	for _, s := range bodySeeds {
		if got, want := validBodyChars(s), refBodyChars(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}

func FuzzValidBodyChars(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validBodyChars(s), refBodyChars(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	})
}
