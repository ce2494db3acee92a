// Package ascii finds runs of plain printable ASCII in strings and byte
// slices eight bytes at a time, so that the reading, checks and escapes a
// request's text needs (message bodies are mostly such text) skip them
// without looking at each byte.
package ascii

const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// Text is what the package reads: a string, or the bytes of a request
// body not yet made one.
type Text interface{ ~string | ~[]byte }

// load8 reads s[i:i+8] as a little-endian word (the compiler makes it one
// load).
func load8[T Text](s T, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// printable8 reports whether every byte of w is in 0x20-0x7F. A byte
// below 0x20 borrows into its high bit (and perhaps the next byte's,
// which then does not matter: the word is refused already); a byte of
// 0x80 or more has it set.
func printable8(w uint64) bool { return (w|(w-0x20*ones))&high == 0 }

// has8 reports whether some byte of w is c (exact: the classic test for a
// zero byte, applied to w^c).
func has8(w uint64, c byte) bool {
	v := w ^ (ones * uint64(c))
	return (v-ones)&^v&high != 0
}

// Plain returns where s's run of plain bytes that begins at i ends, as
// far as whole words of eight bytes go: every byte of s[i:end] is in
// 0x20-0x7F (printable ASCII or DEL) and not one of except, and s[end:]
// is shorter than eight bytes or has a byte that is not plain within its
// first eight. i is returned when the first word is not plain.
func Plain[T Text](s T, i int, except string) int {
	for ; i+8 <= len(s); i += 8 {
		w := load8(s, i)
		if !printable8(w) {
			return i
		}
		for j := 0; j < len(except); j++ {
			if has8(w, except[j]) {
				return i
			}
		}
	}
	return i
}

// Printable is Plain with no exceptions.
func Printable[T Text](s T, i int) int { return Plain(s, i, "") }

// JSONPlain is Plain without the double quote and the backslash: a run a
// JSON string holds as it is, unescaped. (Written out, not Plain with
// exceptions: the constants fold, about 1.7 times as fast on a message
// body, BenchmarkJSONPlain.)
func JSONPlain[T Text](s T, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if w := load8(s, i); !printable8(w) || has8(w, '"') || has8(w, '\\') {
			return i
		}
	}
	return i
}

// XMLPlain is Plain without the characters XML text escapes (the double
// and single quotes, the ampersand, and the angle brackets): a run it
// holds as it is.
func XMLPlain[T Text](s T, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if w := load8(s, i); !printable8(w) || has8(w, '"') || has8(w, '&') || has8(w, '\'') || has8(w, '<') || has8(w, '>') {
			return i
		}
	}
	return i
}
