package filterpolicy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// kind is the JSON type of a node or of a value being matched.
type kind uint8

const (
	kindObject kind = iota + 1
	kindArray
	kindString
	kindNumber
	kindTrue
	kindFalse
	kindNull
)

// node is one JSON value of a parsed document. A document is a slice of
// nodes in document order (pre-order): an object's or array's members
// follow it, and end is the index just past its last descendant, so the
// next sibling of node i is nodes[i].end. One flat slice is one allocation
// for the whole document, which keeps body matching cheap.
type node struct {
	kind kind
	key  string // member name, when the parent is an object
	text string // a string's contents (unescaped), or a number's literal text
	end  int32
}

// maxDepth bounds the nesting of objects and arrays, as Jackson's
// StreamReadConstraints do (1000 by default), so a hostile document cannot
// recurse without bound.
const maxDepth = 1000

// syntaxError is why a document is not JSON, worded like the Jackson
// messages AWS appends to "failed to parse JSON. " (without Jackson's
// location suffix).
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

// parseJSON parses one JSON value that must fill all of s (whitespace
// aside). It is strict RFC 8259: no comments, no trailing commas, no
// leading zeros, no NaN; duplicate member names are kept in order.
func parseJSON(s string) ([]node, error) {
	p := jsonParser{s: s, nodes: make([]node, 0, maxNodes(s))}
	p.skipSpace()
	if p.pos == len(s) {
		return nil, &syntaxError{"No content to map due to end-of-input"}
	}
	if err := p.value(""); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(s) {
		return nil, p.unexpected("expected end-of-input after the root value")
	}
	return p.nodes, nil
}

// maxNodes bounds the number of values in s, so the parse allocates its
// nodes once: every value but the first follows a ',' or an opening
// bracket (counting those inside strings too only overestimates).
func maxNodes(s string) int {
	n := 1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',', '[', '{':
			n++
		}
	}
	return n
}

type jsonParser struct {
	s     string
	pos   int
	depth int
	nodes []node
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// unexpected describes the character at p.pos the way Jackson does.
func (p *jsonParser) unexpected(expecting string) error {
	r, _ := utf8.DecodeRuneInString(p.s[p.pos:])
	return &syntaxError{fmt.Sprintf("Unexpected character (%s (code %d)): %s", quoteChar(r), r, expecting)}
}

func quoteChar(r rune) string {
	if r < 0x20 {
		return fmt.Sprintf("CTRL-CHAR, code %d", r)
	}
	return "'" + string(r) + "'"
}

func (p *jsonParser) endOfInput(in string) error {
	return &syntaxError{"Unexpected end-of-input: expected close marker for " + in}
}

func (p *jsonParser) value(key string) error {
	switch c := p.s[p.pos]; {
	case c == '{':
		return p.container(key, kindObject)
	case c == '[':
		return p.container(key, kindArray)
	case c == '"':
		text, err := p.str()
		if err != nil {
			return err
		}
		p.leaf(key, kindString, text)
		return nil
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number(key)
	case c == 't':
		return p.literal(key, "true", kindTrue)
	case c == 'f':
		return p.literal(key, "false", kindFalse)
	case c == 'n':
		return p.literal(key, "null", kindNull)
	case isTokenChar(c):
		return p.unrecognizedToken()
	default:
		return p.unexpected("expected a valid value (JSON String, Number, Array, Object or token 'null', 'true' or 'false')")
	}
}

func (p *jsonParser) leaf(key string, k kind, text string) {
	p.nodes = append(p.nodes, node{kind: k, key: key, text: text, end: int32(len(p.nodes) + 1)})
}

// container parses an object or an array whose opening bracket is at p.pos.
func (p *jsonParser) container(key string, k kind) error {
	p.depth++
	if p.depth > maxDepth {
		return &syntaxError{fmt.Sprintf("Document nesting depth (%d) exceeds the maximum allowed (%d, from `StreamReadConstraints.getMaxNestingDepth()`)", p.depth, maxDepth)}
	}
	at := len(p.nodes)
	p.nodes = append(p.nodes, node{kind: k, key: key})
	closer, name := byte(']'), "Array"
	if k == kindObject {
		closer, name = '}', "Object"
	}
	p.pos++
	p.skipSpace()
	if p.pos < len(p.s) && p.s[p.pos] == closer {
		p.pos++
	} else {
		for {
			p.skipSpace()
			if p.pos == len(p.s) {
				return p.endOfInput(name)
			}
			member := ""
			if k == kindObject {
				if p.s[p.pos] != '"' {
					return p.unexpected("was expecting double-quote to start field name")
				}
				var err error
				if member, err = p.str(); err != nil {
					return err
				}
				p.skipSpace()
				if p.pos == len(p.s) {
					return p.endOfInput(name)
				}
				if p.s[p.pos] != ':' {
					return p.unexpected("was expecting a colon to separate field name and value")
				}
				p.pos++
				p.skipSpace()
				if p.pos == len(p.s) {
					return p.endOfInput(name)
				}
			}
			if err := p.value(member); err != nil {
				return err
			}
			p.skipSpace()
			if p.pos == len(p.s) {
				return p.endOfInput(name)
			}
			if c := p.s[p.pos]; c == closer {
				p.pos++
				break
			} else if c != ',' {
				return p.unexpected("was expecting comma to separate " + name + " entries")
			}
			p.pos++
		}
	}
	p.nodes[at].end = int32(len(p.nodes))
	p.depth--
	return nil
}

// str parses a string whose opening quote is at p.pos. It allocates only
// when the string has escapes.
func (p *jsonParser) str() (string, error) {
	start := p.pos + 1
	i := start
	for i < len(p.s) {
		c := p.s[i]
		if c == '"' {
			p.pos = i + 1
			return p.s[start:i], nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			p.pos = i
			return "", p.illegalControl(c)
		}
		i++
	}
	var b strings.Builder
	b.WriteString(p.s[start:i])
	for i < len(p.s) {
		c := p.s[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return b.String(), nil
		case c < 0x20:
			p.pos = i
			return "", p.illegalControl(c)
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		}
		i++
		if i == len(p.s) {
			break
		}
		switch e := p.s[i]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(p.s, i+1)
			if !ok {
				return "", &syntaxError{"Unexpected character in Unicode escape: was expecting hex-digit for character escape sequence"}
			}
			i += 4
			if 0xD800 <= r && r < 0xDC00 {
				// A high surrogate needs the low half that follows it.
				if lo, ok := hex4(p.s, i+3); ok && i+2 < len(p.s) && p.s[i+1] == '\\' && p.s[i+2] == 'u' && 0xDC00 <= lo && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				} else {
					r = utf8.RuneError
				}
			} else if 0xDC00 <= r && r < 0xE000 {
				r = utf8.RuneError
			}
			b.WriteRune(r)
		default:
			p.pos = i
			r, _ := utf8.DecodeRuneInString(p.s[i:])
			return "", &syntaxError{fmt.Sprintf("Unrecognized character escape %s (code %d)", quoteChar(r), r)}
		}
		i++
	}
	p.pos = len(p.s)
	return "", &syntaxError{"Unexpected end-of-input: was expecting closing quote for a string value"}
}

func (p *jsonParser) illegalControl(c byte) error {
	return &syntaxError{fmt.Sprintf("Illegal unquoted character ((CTRL-CHAR, code %d)): has to be escaped using backslash to be included in string value", c)}
}

// hex4 reads four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number parses a JSON number at p.pos and keeps its literal text: the
// filter compares numbers both by value and by their text.
func (p *jsonParser) number(key string) error {
	s, start := p.s, p.pos
	i := start
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(s) && s[i] == '0' {
		i++
		if i < len(s) && '0' <= s[i] && s[i] <= '9' {
			return &syntaxError{"Invalid numeric value: Leading zeroes not allowed"}
		}
	} else if digits() == 0 {
		p.pos = i
		if i == len(s) {
			return &syntaxError{"Unexpected end-of-input in a numeric value"}
		}
		return p.unexpected("expected digit (0-9) to follow minus sign, for valid numeric value")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			p.pos = i
			if i == len(s) {
				return &syntaxError{"Unexpected end-of-input in a numeric value"}
			}
			return p.unexpected("Decimal point not followed by a digit")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			if i == len(s) {
				return &syntaxError{"Unexpected end-of-input in a numeric value"}
			}
			return p.unexpected("Exponent indicator not followed by a digit")
		}
	}
	p.pos = i
	p.leaf(key, kindNumber, s[start:i])
	return nil
}

func (p *jsonParser) literal(key, word string, k kind) error {
	if !strings.HasPrefix(p.s[p.pos:], word) || (p.pos+len(word) < len(p.s) && isTokenChar(p.s[p.pos+len(word)])) {
		return p.unrecognizedToken()
	}
	p.pos += len(word)
	p.leaf(key, k, word)
	return nil
}

func (p *jsonParser) unrecognizedToken() error {
	end := p.pos
	for end < len(p.s) && end-p.pos < 256 && isTokenChar(p.s[end]) {
		end++
	}
	return &syntaxError{fmt.Sprintf("Unrecognized token '%s': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')", p.s[p.pos:end])}
}

// isTokenChar reports the characters Jackson gathers into an unrecognized
// token.
func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c >= 0x80
}
