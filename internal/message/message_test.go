package message

import (
	"math/rand/v2"
	"regexp"
	"strings"
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
		if got, want := ValidBodyChars(s), refBodyChars(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
}

func FuzzValidBodyChars(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidBodyChars(s), refBodyChars(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	})
}

// validName is held to the regular expressions it replaced.
func TestValidNameMatchesRegexp(t *testing.T) {
	plain := regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	dotted := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,256}$`)
	check := func(s string) {
		if got, want := ValidName(s, 80, false), plain.MatchString(s); got != want {
			t.Errorf("ValidName(%q, 80, false) = %v, want %v", s, got, want)
		}
		if got, want := ValidName(s, 256, true), dotted.MatchString(s); got != want {
			t.Errorf("ValidName(%q, 256, true) = %v, want %v", s, got, want)
		}
	}
	for _, s := range []string{"", "a", "A-z_09", "a.b", "a b", "é", "a\n", strings.Repeat("x", 80), strings.Repeat("x", 81),
		strings.Repeat("y", 256), strings.Repeat("y", 257), "-", ".", "a/b", "a:b", "\x00"} {
		check(s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		alphabet := "aZ09_-. /:é\x00\xff"
		if i%2 == 0 {
			alphabet = "aZ09_-." // mostly valid, so long names come up
		}
		b := make([]byte, rng.IntN(300))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

// TestIsNumber: SQS's Number type: up to 38 significant digits, a
// magnitude between 10^-128 and 10^126, and a well-formed exponent.
func TestIsNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-0": true, "+7": true, "1.5": true, ".5": true, "1.": true, " 42 ": true,
		"1e5": true, "2.5E-3": true, "1e126": true, "9.9e125": true, "1e-128": true, "0e999999": false, "0e9999": true,
		"00012300000": true, strings.Repeat("9", 38): true, strings.Repeat("9", 38) + "000": true,
		"0.000" + strings.Repeat("1", 38): true,
		"1e400":                           false, "1e127": false, "1e-129": false, "-1e400": false, "1e99999999999": false,
		strings.Repeat("9", 39): false, "": false, ".": false, "-": false, "1e": false,
		"1e+": false, "e5": false, "1.2.3": false, "1e5e3": false, "0x10": false, "NaN": false, "Infinity": false,
	} {
		if got := isNumber(s); got != want {
			t.Errorf("isNumber(%q) = %v, want %v", s, got, want)
		}
	}
}
