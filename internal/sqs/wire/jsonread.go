package wire

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicemq/sluice/internal/ascii"
	st "github.com/sluicemq/sluice/sluicetype"
)

// jsonReader reads one JSON text (RFC 8259, strictly: no comments, no
// trailing commas, no invalid UTF-8, no lone surrogate escapes) into the
// Params model. It is written for request bodies, which are mostly a
// message's text: a string's plain run is passed over eight bytes at a
// time (package ascii) and copied out once; a general tokenizer looked at
// each byte twice, once to find the string's end and once to unquote it
// (BenchmarkDecodeJSON).
type jsonReader struct {
	b      []byte
	i      int
	budget int // values left (MaxJSONValues)
	// stack holds the members and items read whose object or array is
	// not finished; when it finishes they move to arena, where the
	// values of many objects and arrays share an allocation.
	stack []value
	arena []value
}

// errSurrogate is a lone UTF-16 surrogate escape: DecodeJSON refuses it as
// InvalidMessageContents, as it refuses invalid UTF-8.
var errSurrogate = errors.New("an unpaired UTF-16 surrogate escape")

func (r *jsonReader) fail(what string) error {
	if r.i >= len(r.b) {
		return fmt.Errorf("unexpected end of input, %s", what)
	}
	return fmt.Errorf("invalid character %q at offset %d, %s", r.b[r.i], r.i, what)
}

func (r *jsonReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// value reads one value (white space before it already passed).
func (r *jsonReader) value(depth int) (value, error) {
	if r.budget--; r.budget < 0 {
		return value{}, st.Errorf(CodeMalformedInput, "The request body holds more than %d JSON values.", MaxJSONValues)
	}
	if depth > MaxJSONDepth {
		return value{}, st.Errorf(CodeMalformedInput, "The request body nests JSON deeper than %d levels.", MaxJSONDepth)
	}
	if r.i >= len(r.b) {
		return value{}, r.fail("expecting a value")
	}
	switch c := r.b[r.i]; {
	case c == '{':
		return r.object(depth)
	case c == '[':
		return r.array(depth)
	case c == '"':
		s, err := r.str(false)
		return value{kind: kStr, s: s}, err
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	case c == 't':
		return value{kind: kBool, s: "true"}, r.literal("true")
	case c == 'f':
		return value{kind: kBool, s: "false"}, r.literal("false")
	case c == 'n':
		return value{kind: kNull}, r.literal("null")
	}
	return value{}, r.fail("expecting a value")
}

func (r *jsonReader) literal(word string) error {
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		return r.fail("expecting " + word)
	}
	r.i += len(word)
	return nil
}

func (r *jsonReader) object(depth int) (value, error) {
	base := len(r.stack)
	more, err := r.open('}')
	for ; more && err == nil; more, err = r.next('}', "in an object") {
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			return value{}, r.fail("expecting a member name")
		}
		name, err := r.str(true)
		if err != nil {
			return value{}, err
		}
		r.space()
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			return value{}, r.fail("expecting ':' after a member name")
		}
		r.i++
		r.space()
		v, err := r.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		v.name = name
		r.stack = append(r.stack, v)
	}
	if err != nil {
		return value{}, err
	}
	r.stack = lastOfEachName(r.stack, base)
	return value{kind: kObj, kids: r.finish(base)}, nil
}

func (r *jsonReader) array(depth int) (value, error) {
	base := len(r.stack)
	more, err := r.open(']')
	for ; more && err == nil; more, err = r.next(']', "in an array") {
		v, err := r.value(depth + 1)
		if err != nil {
			return value{}, err
		}
		r.stack = append(r.stack, v)
	}
	if err != nil {
		return value{}, err
	}
	return value{kind: kArr, kids: r.finish(base)}, nil
}

// finish moves the values on the stack from base into the arena: the
// members or items of the object or array just read (nil if none).
func (r *jsonReader) finish(base int) []value {
	n := len(r.stack) - base
	if n == 0 {
		return nil
	}
	if cap(r.arena)-len(r.arena) < n {
		// Chunks that double, from a small one: most requests hold a
		// few values, a batch a hundred or so.
		r.arena = make([]value, 0, max(n, min(2*cap(r.arena), 256), 8))
	}
	at := len(r.arena)
	r.arena = append(r.arena, r.stack[base:]...)
	clear(r.stack[base:])
	r.stack = r.stack[:base]
	return r.arena[at : at+n : at+n]
}

// lastOfEachName drops, of the object's members (vs from base), each one
// whose name comes again later: a name given twice keeps its last value,
// as encoding/json does. A large object is checked with a map, not pair
// by pair.
func lastOfEachName(vs []value, base int) []value {
	ms := vs[base:]
	if len(ms) < 2 {
		return vs
	}
	later := func(i int) bool {
		for j := i + 1; j < len(ms); j++ {
			if ms[j].name == ms[i].name {
				return true
			}
		}
		return false
	}
	if len(ms) > 16 {
		last := make(map[string]int, len(ms))
		for i := range ms {
			last[ms[i].name] = i
		}
		if len(last) == len(ms) {
			return vs
		}
		later = func(i int) bool { return last[ms[i].name] != i }
	}
	keep := 0
	for i := range ms {
		if !later(i) {
			ms[keep] = ms[i]
			keep++
		}
	}
	clear(ms[keep:])
	return vs[:base+keep]
}

// open passes an object's or array's opening bracket (at r.i) and the
// white space after it, and reports whether a member follows (false:
// close came at once, and is passed).
func (r *jsonReader) open(close byte) (more bool, err error) {
	r.i++
	r.space()
	if r.i < len(r.b) && r.b[r.i] == close {
		r.i++
		return false, nil
	}
	return true, nil
}

// next passes what follows a member of an object or array: a comma and
// the white space after it (more: another member follows), or close.
func (r *jsonReader) next(close byte, in string) (more bool, err error) {
	r.space()
	switch {
	case r.i < len(r.b) && r.b[r.i] == ',':
		r.i++
		r.space()
		return true, nil
	case r.i < len(r.b) && r.b[r.i] == close:
		r.i++
		return false, nil
	}
	return false, r.fail("expecting ',' or '" + string(close) + "' " + in)
}

// number reads a number as the text it is.
func (r *jsonReader) number() (value, error) {
	start := r.i
	if r.b[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.b) && r.b[r.i] == '0':
		r.i++
	case r.digits() == 0:
		return value{}, r.fail("expecting a digit")
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if r.digits() == 0 {
			return value{}, r.fail("expecting a digit after the decimal point")
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if r.digits() == 0 {
			return value{}, r.fail("expecting a digit in the exponent")
		}
	}
	return value{kind: kNum, s: string(r.b[start:r.i])}, nil
}

func (r *jsonReader) digits() int {
	start := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}

// str reads a string. A plain one (no escapes) is its bytes, copied once;
// with name, a member name the protocol uses is the package's own string.
func (r *jsonReader) str(name bool) (string, error) {
	start := r.i + 1
	i := start
	for {
		i = ascii.JSONPlain(r.b, i)
		if i >= len(r.b) {
			r.i = i
			return "", r.fail("in a string")
		}
		switch c := r.b[i]; {
		case c == '"':
			r.i = i + 1
			if name {
				if s, ok := memberNames[string(r.b[start:i])]; ok {
					return s, nil
				}
			}
			return string(r.b[start:i]), nil
		case c == '\\':
			r.i = start
			return r.escaped()
		case c < 0x20:
			r.i = i
			return "", r.fail("a control character in a string")
		case c < utf8.RuneSelf:
			i++
		default:
			if rn, n := utf8.DecodeRune(r.b[i:]); rn != utf8.RuneError || n > 1 {
				i += n
				continue
			}
			r.i = i
			return "", r.fail("invalid UTF-8 in a string")
		}
	}
}

// escaped reads the rest of a string that has escapes, from its first
// byte after the quote.
func (r *jsonReader) escaped() (string, error) {
	var out []byte
	for {
		i := ascii.JSONPlain(r.b, r.i)
		out = append(out, r.b[r.i:i]...)
		r.i = i
		if r.i >= len(r.b) {
			return "", r.fail("in a string")
		}
		switch c := r.b[r.i]; {
		case c == '"':
			r.i++
			return string(out), nil
		case c == '\\':
			rn, err := r.escape()
			if err != nil {
				return "", err
			}
			out = utf8.AppendRune(out, rn)
		case c < 0x20:
			return "", r.fail("a control character in a string")
		case c < utf8.RuneSelf:
			out = append(out, c)
			r.i++
		default:
			rn, n := utf8.DecodeRune(r.b[r.i:])
			if rn == utf8.RuneError && n == 1 {
				return "", r.fail("invalid UTF-8 in a string")
			}
			out = append(out, r.b[r.i:r.i+n]...)
			r.i += n
		}
	}
}

// escape reads one escape (at its backslash): a surrogate pair's two
// escapes are one character.
func (r *jsonReader) escape() (rune, error) {
	if r.i+1 >= len(r.b) {
		r.i = len(r.b)
		return 0, r.fail("in an escape")
	}
	r.i++
	c := r.b[r.i]
	r.i++
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		hi, err := r.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(hi) {
			return hi, nil
		}
		if hi >= 0xDC00 || r.i+1 >= len(r.b) || r.b[r.i] != '\\' || r.b[r.i+1] != 'u' {
			return 0, errSurrogate
		}
		r.i += 2
		lo, err := r.hex4()
		if err != nil {
			return 0, err
		}
		if rn := utf16.DecodeRune(hi, lo); rn != utf8.RuneError {
			return rn, nil
		}
		return 0, errSurrogate
	}
	r.i--
	return 0, r.fail("in an escape")
}

func (r *jsonReader) hex4() (rune, error) {
	var v rune
	for range 4 {
		if r.i >= len(r.b) {
			return 0, r.fail("in a \\u escape")
		}
		c := r.b[r.i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, r.fail("in a \\u escape")
		}
		r.i++
	}
	return v, nil
}

// memberNames are the member names requests carry, each mapped to itself:
// reading a name looks it up instead of allocating it.
var memberNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"QueueUrl", "QueueName", "QueueNamePrefix", "QueueOwnerAWSAccountId", "Entries", "Id",
		"MessageBody", "DelaySeconds", "MessageAttributes", "MessageSystemAttributes",
		"MessageDeduplicationId", "MessageGroupId", "DataType", "StringValue", "BinaryValue",
		"StringListValues", "BinaryListValues", "ReceiptHandle", "MaxNumberOfMessages",
		"WaitTimeSeconds", "VisibilityTimeout", "AttributeNames", "MessageAttributeNames",
		"MessageSystemAttributeNames", "ReceiveRequestAttemptId", "Attributes", "Tags", "tags",
		"TagKeys", "NextToken", "MaxResults", "Label", "AWSAccountIds", "Actions",
		"SourceArn", "DestinationArn", "MaxNumberOfMessagesPerSecond", "TaskHandle",
	} {
		m[n] = n
	}
	return m
}()
