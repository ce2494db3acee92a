// Package wire is the SQS wire formats, apart from what a request does:
// both protocols (AWS JSON 1.0 and Query) decoded into one model (Params,
// with bounds on what a body may decode to), the answers encoded as JSON or
// Query XML from one model (Obj), and the error catalogue both render from.
package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Params is the canonical request model: the JSON protocol's shape (member
// names as in the model), decoded from either protocol. Values are string,
// json.Number, bool, []any or map[string]any.
type Params map[string]any

// MaxJSONValues and MaxJSONDepth bound what one JSON body may decode to.
// The largest valid request (a batch of ten entries with ten message
// attributes each) has well under a thousand values and a depth of five;
// without a bound, 5 MiB of `[0,0,...]` decodes to over a hundred MiB.
const (
	MaxJSONValues = 10000
	MaxJSONDepth  = 16
)

// decodeJSON reads an AWS JSON 1.0 body: one JSON object. Duplicate
// member names keep the last value, as with encoding/json; anything after
// the object is an error. Invalid UTF-8 and lone surrogate escapes are
// refused with InvalidMessageContents (as the Query protocol refuses
// them), not replaced: the stored body and its MD5 must be what the
// client sent.
func DecodeJSON(body []byte) (Params, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Params{}, nil
	}
	r := jsonReader{b: body, budget: MaxJSONValues}
	r.space()
	v, err := r.value(0)
	if err == nil {
		if r.space(); r.i < len(r.b) {
			err = errors.New("unexpected data after the top-level object")
		}
	}
	if err != nil {
		var e *st.Error
		switch {
		case errors.As(err, &e):
			return nil, e
		case !utf8.Valid(body):
			return nil, st.Errorf(st.CodeInvalidMessageContents, "The request contains invalid UTF-8.")
		case errors.Is(err, errSurrogate):
			return nil, st.Errorf(st.CodeInvalidMessageContents, "The request contains an unpaired UTF-16 surrogate escape, which is not a character.")
		}
		return nil, st.Errorf(CodeMalformedInput, "The request body is not valid JSON: %v", err)
	}
	switch p := v.(type) {
	case nil:
		return Params{}, nil
	case map[string]any:
		return p, nil
	}
	return nil, st.Errorf(CodeMalformedInput, "The request body is not a JSON object.")
}

// queryLists maps the Query protocol's flattened List and map prefixes to
// the JSON member names they feed. A prefix may feed several members (the
// Query model reuses names across operations).
var queryLists = map[string][]string{
	"AttributeName":        {"AttributeNames", "MessageSystemAttributeNames"},
	"MessageAttributeName": {"MessageAttributeNames"},
	"TagKey":               {"TagKeys"},
	"AWSAccountId":         {"AWSAccountIds"},
	"ActionName":           {"Actions"},
	"StringListValue":      {"StringListValues"},
	"BinaryListValue":      {"BinaryListValues"},
}

var queryMaps = map[string]struct {
	members  []string
	key, val string
}{
	"Attribute":              {[]string{"Attributes"}, "Name", "Value"},
	"Tag":                    {[]string{"tags", "Tags"}, "Key", "Value"},
	"MessageAttribute":       {[]string{"MessageAttributes"}, "Name", "Value"},
	"MessageSystemAttribute": {[]string{"MessageSystemAttributes"}, "Name", "Value"},
}

// decodeQuery turns flattened Query parameters into the canonical model.
func DecodeQuery(vals url.Values) Params {
	flat := map[string]string{}
	for k, v := range vals {
		if len(v) > 0 {
			flat[k] = v[0]
		}
	}
	return unflatten(flat)
}

func unflatten(flat map[string]string) Params {
	out := Params{}
	groups := map[string]map[string]map[string]string{} // prefix -> index -> rest -> value
	for k, v := range flat {
		prefix, rest, ok := strings.Cut(k, ".")
		if !ok {
			if _, isList := queryLists[k]; isList && k == "MessageAttributeName" {
				// a bare MessageAttributeName (no .N) is one entry
				addGroup(groups, k, "1", "", v)
				continue
			}
			out[k] = v
			continue
		}
		idx, rest2, _ := strings.Cut(rest, ".")
		if _, err := strconv.Atoi(idx); err != nil {
			out[k] = v
			continue
		}
		addGroup(groups, prefix, idx, rest2, v)
	}
	for prefix, byIdx := range groups {
		idxs := make([]string, 0, len(byIdx))
		for i := range byIdx {
			idxs = append(idxs, i)
		}
		sort.Slice(idxs, func(a, b int) bool {
			x, _ := strconv.Atoi(idxs[a])
			y, _ := strconv.Atoi(idxs[b])
			return x < y
		})
		switch {
		case strings.HasSuffix(prefix, "BatchRequestEntry"):
			var List []any
			for _, i := range idxs {
				List = append(List, map[string]any(unflatten(byIdx[i])))
			}
			out["Entries"] = List
		case queryMaps[prefix].members != nil:
			spec := queryMaps[prefix]
			m := map[string]any{}
			for _, i := range idxs {
				entry := byIdx[i]
				name, ok := entry[spec.key]
				if !ok {
					continue
				}
				if v, ok := entry[spec.val]; ok {
					m[name] = v
					continue
				}
				sub := map[string]string{}
				for k, v := range entry {
					if r, ok := strings.CutPrefix(k, spec.val+"."); ok {
						sub[r] = v
					}
				}
				m[name] = map[string]any(unflatten(sub))
			}
			for _, member := range spec.members {
				out[member] = m
			}
		case queryLists[prefix] != nil:
			var List []any
			for _, i := range idxs {
				if v, ok := byIdx[i][""]; ok {
					List = append(List, v)
				}
			}
			for _, member := range queryLists[prefix] {
				out[member] = List
			}
		default:
			for _, i := range idxs {
				for r, v := range byIdx[i] {
					out[prefix+"."+i+"."+r] = v
				}
			}
		}
	}
	return out
}

func addGroup(groups map[string]map[string]map[string]string, prefix, idx, rest, v string) {
	if groups[prefix] == nil {
		groups[prefix] = map[string]map[string]string{}
	}
	if groups[prefix][idx] == nil {
		groups[prefix][idx] = map[string]string{}
	}
	groups[prefix][idx][rest] = v
}

// ---- typed access ----

func Missing(name string) error {
	return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter %s.", name)
}

func BadType(name string) error {
	return st.Errorf(st.CodeInvalidParameterValue, "Value for parameter %s is invalid. Reason: wrong type.", name)
}

func (p Params) Has(name string) bool { _, ok := p[name]; return ok }

func (p Params) Str(name string) (string, error) {
	switch v := p[name].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	default:
		return "", BadType(name)
	}
}

func (p Params) Required(name string) (string, error) {
	s, err := p.Str(name)
	if err == nil && s == "" {
		return "", Missing(name)
	}
	return s, err
}

// intp returns nil when absent.
func (p Params) Intp(name string) (*int, error) {
	v, ok := p[name]
	if !ok || v == nil {
		return nil, nil
	}
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
	case json.Number:
		s = x.String()
	default:
		return nil, BadType(name)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter %s is invalid. Reason: must be an integer.", s, name)
	}
	return &n, nil
}

func (p Params) StrList(name string) ([]string, error) { return listOf[string](p, name) }

// listOf returns the list parameter name (nil when absent), each item of
// type T, or BadType.
func listOf[T any](p Params, name string) ([]T, error) {
	v, ok := p[name]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, BadType(name)
	}
	out := make([]T, 0, len(list))
	for _, x := range list {
		t, ok := x.(T)
		if !ok {
			return nil, BadType(name)
		}
		out = append(out, t)
	}
	return out, nil
}

// object returns the object parameter name (nil when absent), or BadType.
func (p Params) object(name string) (map[string]any, error) {
	v, ok := p[name]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, BadType(name)
	}
	return m, nil
}

func (p Params) StrMap(name string) (map[string]string, error) {
	m, err := p.object(name)
	if m == nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		switch s := x.(type) {
		case string:
			out[k] = s
		case json.Number:
			out[k] = s.String()
		case bool:
			out[k] = strconv.FormatBool(s)
		default:
			return nil, BadType(name)
		}
	}
	return out, nil
}

func (p Params) Entries(name string) ([]Params, error) {
	ms, err := listOf[map[string]any](p, name)
	if ms == nil {
		return nil, err
	}
	out := make([]Params, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out, nil
}

func DecodeB64(name, s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value for parameter %s is invalid. Reason: not valid base64.", name)
	}
	return b, nil
}

// msgAttrs decodes MessageAttributes / MessageSystemAttributes.
func (p Params) MsgAttrs(name string) (map[string]st.AttributeValue, error) {
	m, err := p.object(name)
	if m == nil {
		return nil, err
	}
	out := make(map[string]st.AttributeValue, len(m))
	for k, x := range m {
		av, ok := x.(map[string]any)
		if !ok {
			return nil, BadType(name)
		}
		ap := Params(av)
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
