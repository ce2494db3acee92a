// Package wire is the SQS wire formats, apart from what a request does:
// both protocols (AWS JSON 1.0 and Query) decoded into one model (Params,
// with bounds on what a body may decode to), the answers encoded as JSON or
// Query XML from one model (Obj), and the error catalogue both render from.
package wire

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	st "github.com/sluicemq/sluice/sluicetype"
)

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
	r := jsonReader{b: body, budget: MaxJSONValues, stack: make([]value, 0, 16)}
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
	switch v.kind {
	case kNull:
		return Params{}, nil
	case kObj:
		return v.kids, nil
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
	return fromAny(unflatten(flat))
}

// unflatten reads flattened Query parameters into the generic model:
// string, []any and map[string]any.
func unflatten(flat map[string]string) map[string]any {
	out := map[string]any{}
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
				List = append(List, unflatten(byIdx[i]))
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
				m[name] = unflatten(sub)
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

func DecodeB64(name, s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, st.Errorf(st.CodeInvalidParameterValue, "Value for parameter %s is invalid. Reason: not valid base64.", name)
	}
	return b, nil
}
