package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Params is the canonical request model: the members of the request's JSON
// object (the JSON protocol's shape, member names as in the model),
// decoded from either protocol. A member name given twice keeps its last
// value, as with encoding/json.
//
// A value is a struct, not an interface, and an object's members are a
// slice, not a map: a SendMessageBatch of ten messages decoded into maps
// of interfaces made about 160 objects, most of the decoder's cost
// (BenchmarkDecodeJSON).
type Params []value

// kind is what a value is.
type kind uint8

const (
	kNull kind = iota
	kStr
	kNum  // s is the number's text, as sent
	kBool // s is "true" or "false"
	kArr
	kObj
)

// value is one decoded value: in an object, with its member name.
type value struct {
	name string
	s    string  // a string, a number's text, or a boolean's
	kids []value // an array's items, an object's members
	kind kind
}

// get is the member name (the last one of that name), or nil.
func (p Params) get(name string) *value {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].name == name {
			return &p[i]
		}
	}
	return nil
}

// scalar is a string, number or boolean's text; ok is false for an array
// or object (null is "").
func (v *value) scalar() (s string, ok bool) {
	switch v.kind {
	case kNull:
		return "", true
	case kStr, kNum, kBool:
		return v.s, true
	}
	return "", false
}

// ---- typed access ----

func Missing(name string) error {
	return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter %s.", name)
}

func BadType(name string) error {
	return st.Errorf(st.CodeInvalidParameterValue, "Value for parameter %s is invalid. Reason: wrong type.", name)
}

// Has says whether the request has member name (null included).
func (p Params) Has(name string) bool { return p.get(name) != nil }

// Str is member name as text: a string, a number's text, "true" or
// "false"; "" when absent or null; BadType for an array or object.
func (p Params) Str(name string) (string, error) {
	v := p.get(name)
	if v == nil {
		return "", nil
	}
	s, ok := v.scalar()
	if !ok {
		return "", BadType(name)
	}
	return s, nil
}

// Required is Str, with Missing when it is "".
func (p Params) Required(name string) (string, error) {
	s, err := p.Str(name)
	if err == nil && s == "" {
		return "", Missing(name)
	}
	return s, err
}

// Intp is member name as an integer (a number, or a string of one), nil
// when absent or null.
func (p Params) Intp(name string) (*int, error) {
	v := p.get(name)
	if v == nil || v.kind == kNull {
		return nil, nil
	}
	var s string
	switch v.kind {
	case kStr:
		s = strings.TrimSpace(v.s)
	case kNum:
		s = v.s
	default:
		return nil, BadType(name)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter %s is invalid. Reason: must be an integer.", s, name)
	}
	return &n, nil
}

// compound is member name's members or items when it is an object or
// array (of kind k): nil when absent or null, empty (not nil) when it is
// {} or [], BadType when it is anything else.
func (p Params) compound(name string, k kind) ([]value, error) {
	v := p.get(name)
	switch {
	case v == nil || v.kind == kNull:
		return nil, nil
	case v.kind != k:
		return nil, BadType(name)
	case v.kids == nil:
		return []value{}, nil
	}
	return v.kids, nil
}

// listOf is member name, a list whose items are all of kind k, each
// converted by as (nil when absent or null), or BadType.
func listOf[T any](p Params, name string, k kind, as func(*value) T) ([]T, error) {
	items, err := p.compound(name, kArr)
	if items == nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i := range items {
		if items[i].kind != k {
			return nil, BadType(name)
		}
		out[i] = as(&items[i])
	}
	return out, nil
}

// StrList is member name as a list of strings (nil when absent or null).
func (p Params) StrList(name string) ([]string, error) {
	return listOf(p, name, kStr, func(v *value) string { return v.s })
}

// Entries is member name, a list of objects (nil when absent or null).
func (p Params) Entries(name string) ([]Params, error) {
	return listOf(p, name, kObj, func(v *value) Params { return v.kids })
}

// StrMap is member name, an object of strings (numbers and booleans as
// their text), nil when absent or null.
func (p Params) StrMap(name string) (map[string]string, error) {
	m, err := p.compound(name, kObj)
	if m == nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for i := range m {
		s, ok := m[i].scalar()
		if !ok || m[i].kind == kNull {
			return nil, BadType(name)
		}
		out[m[i].name] = s
	}
	return out, nil
}

// MsgAttrs decodes MessageAttributes / MessageSystemAttributes.
func (p Params) MsgAttrs(name string) (map[string]st.AttributeValue, error) {
	m, err := p.compound(name, kObj)
	if m == nil {
		return nil, err
	}
	out := make(map[string]st.AttributeValue, len(m))
	for i := range m {
		if m[i].kind != kObj {
			return nil, BadType(name)
		}
		k, ap := m[i].name, Params(m[i].kids)
		var a st.AttributeValue
		var err error
		if a.DataType, err = ap.Str("DataType"); err != nil {
			return nil, err
		}
		if ap.Has("StringValue") {
			s, err := ap.Str("StringValue")
			if err != nil {
				return nil, err
			}
			a.StringValue = &s
		}
		if ap.Has("BinaryValue") {
			s, err := ap.Str("BinaryValue")
			if err != nil {
				return nil, err
			}
			if a.BinaryValue, err = DecodeB64(fmt.Sprintf("%s.%s.BinaryValue", name, k), s); err != nil {
				return nil, err
			}
			if a.BinaryValue == nil {
				a.BinaryValue = []byte{}
			}
		}
		if a.StringListValues, err = ap.StrList("StringListValues"); err != nil {
			return nil, err
		}
		bl, err := ap.StrList("BinaryListValues")
		if err != nil {
			return nil, err
		}
		for _, s := range bl {
			b, err := DecodeB64(name+".BinaryListValues", s)
			if err != nil {
				return nil, err
			}
			a.BinaryListValues = append(a.BinaryListValues, b)
		}
		out[k] = a
	}
	return out, nil
}

// Generic is p in encoding/json's generic model: string, json.Number,
// bool, nil, []any and map[string]any (what the tests compare with
// encoding/json).
func (p Params) Generic() map[string]any {
	out := make(map[string]any, len(p))
	for _, v := range p {
		out[v.name] = v.generic()
	}
	return out
}

func (v value) generic() any {
	switch v.kind {
	case kStr:
		return v.s
	case kNum:
		return json.Number(v.s)
	case kBool:
		return v.s == "true"
	case kArr:
		items := make([]any, len(v.kids))
		for i, x := range v.kids {
			items[i] = x.generic()
		}
		return items
	case kObj:
		return Params(v.kids).Generic()
	}
	return nil
}

// fromAny is the Params of the generic model the Query protocol is first
// unflattened into (string, []any, map[string]any), members in name order.
func fromAny(m map[string]any) Params {
	out := make(Params, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := valueOf(m[k])
		v.name = k
		out = append(out, v)
	}
	return out
}

func valueOf(x any) value {
	switch x := x.(type) {
	case string:
		return value{kind: kStr, s: x}
	case []any:
		items := make([]value, len(x))
		for i, y := range x {
			items[i] = valueOf(y)
		}
		return value{kind: kArr, kids: items}
	case map[string]any:
		return value{kind: kObj, kids: fromAny(x)}
	}
	return value{kind: kNull}
}
