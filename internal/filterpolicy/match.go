package filterpolicy

import (
	"slices"
	"strings"
)

// value is one scalar of a message: a string attribute, a Number
// attribute, an element of a String.Array, or a leaf of a JSON body.
// Matching is typed, as in AWS's rule engine: a policy string matches only
// strings, a policy number only numbers, prefix/suffix/equals-ignore-case/
// cidr only strings, numeric only numbers.
type value struct {
	kind   kind // kindString, kindNumber, kindTrue, kindFalse or kindNull
	text   string
	scaled int64 // a number's value (see number.go), when numOK
	numOK  bool
}

func stringValue(s string) value { return value{kind: kindString, text: s} }

func numberValue(text string) value {
	scaled, _, ok := scaleNumber(text)
	return value{kind: kindNumber, text: text, scaled: scaled, numOK: ok}
}

// nodeValue is the value of a scalar node.
func nodeValue(n *node) value {
	if n.kind == kindNumber {
		return numberValue(n.text)
	}
	return value{kind: n.kind, text: n.text}
}

// matchValue reports whether any of the leaf's values accepts v.
func (l *leaf) matchValue(v *value) bool {
	if l.existsTrue {
		return true
	}
	switch v.kind {
	case kindString:
		if _, found := slices.BinarySearch(l.strs, v.text); found {
			return true
		}
		if len(l.ips) > 0 {
			if addr, ok := parseIP(v.text); ok && ipEqual(l.ips, addr) {
				return true
			}
		}
	case kindNumber:
		for _, n := range l.nums {
			if (n.ok && v.numOK && n.scaled == v.scaled) || n.text == v.text {
				return true
			}
		}
	case kindTrue:
		if l.true_ {
			return true
		}
	case kindFalse:
		if l.false_ {
			return true
		}
	case kindNull:
		if l.null {
			return true
		}
	}
	for i := range l.ops {
		if l.ops[i].match(v) {
			return true
		}
	}
	return false
}

// match reports whether an operator condition accepts v. The anything-but
// conditions accept every value they cannot prove equal, so
// {"anything-but": ["a"]} accepts a number and {"anything-but": [1]}
// accepts a string, as in AWS's rule engine; what makes them fail for a
// missing key is that there is no value to test.
func (m *matcher) match(v *value) bool {
	isString := v.kind == kindString
	switch m.kind {
	case opPrefix:
		return isString && strings.HasPrefix(v.text, m.str)
	case opSuffix:
		return isString && strings.HasSuffix(v.text, m.str)
	case opEqualsIgnoreCase:
		return isString && strings.EqualFold(v.text, m.str)
	case opAnythingButStrings:
		if !isString {
			return true
		}
		_, found := slices.BinarySearch(m.strs, v.text)
		return !found
	case opAnythingButNumbers:
		if v.kind != kindNumber || !v.numOK {
			return true
		}
		_, found := slices.BinarySearch(m.nums, v.scaled)
		return !found
	case opAnythingButPrefix:
		return !isString || !strings.HasPrefix(v.text, m.str)
	case opNumeric:
		return v.kind == kindNumber && v.numOK && m.rng.contains(v.scaled)
	case opCIDR:
		if !isString {
			return false
		}
		addr, ok := parseIP(v.text)
		return ok && m.cidr.Contains(addr)
	}
	return false
}

// Attribute is a message attribute as Publish carried it.
type Attribute struct {
	// Type is the DataType: "String", "Number", "Binary" or
	// "String.Array", or one of the first three followed by "." and a
	// custom label ("Number.float"), which counts as that type.
	Type string
	// Value is the StringValue. A Binary attribute's value is not used.
	Value string
}

// attributeType is how an attribute takes part in matching.
type attributeType uint8

const (
	attrIgnored attributeType = iota // Binary, or an unknown type: as if absent
	attrString
	attrNumber
	attrArray
)

func typeOf(dataType string) attributeType {
	if dataType == "String.Array" {
		return attrArray
	}
	base, _, _ := strings.Cut(dataType, ".")
	switch base {
	case "String":
		return attrString
	case "Number":
		return attrNumber
	}
	return attrIgnored
}

// MatchAttributes reports whether a message with these attributes passes
// the policy (scope MessageAttributes). A nil policy passes everything.
//
// Binary attributes are ignored: they count as absent. A String.Array
// value is parsed as JSON and its elements are matched one by one (any
// may match; elements of nested arrays too, objects never); if it is not
// a JSON array nothing matches it, not even {"exists": ...}. An empty
// String.Array counts as absent.
func (p *Policy) MatchAttributes(attrs map[string]Attribute) bool {
	if p == nil {
		return true
	}
	var arrays arrayCache
	for _, branch := range p.branches {
		if matchAttributeBranch(branch, attrs, &arrays) {
			return true
		}
	}
	return false
}

func matchAttributeBranch(branch []*leaf, attrs map[string]Attribute, arrays *arrayCache) bool {
	for _, l := range branch {
		a, ok := attrs[l.path]
		t := attrIgnored
		if ok {
			t = typeOf(a.Type)
		}
		switch t {
		case attrIgnored:
			if !l.absentOK {
				return false
			}
		case attrString:
			v := stringValue(a.Value)
			if !l.matchValue(&v) {
				return false
			}
		case attrNumber:
			v := numberValue(a.Value)
			if !l.matchValue(&v) {
				return false
			}
		case attrArray:
			nodes, ok := arrays.get(l.path, a.Value)
			if !ok {
				return false
			}
			matched, sawScalar := matchArrayElements(nodes, 0, l)
			if !matched && (sawScalar || !l.absentOK) {
				return false
			}
		}
	}
	return true
}

// matchArrayElements tests the scalars of the array at nodes[i] (and of
// the arrays nested in it) against l. sawScalar reports whether there was a
// scalar at all.
func matchArrayElements(nodes []node, i int, l *leaf) (matched, sawScalar bool) {
	for j := i + 1; j < int(nodes[i].end); j = int(nodes[j].end) {
		switch n := &nodes[j]; n.kind {
		case kindObject:
		case kindArray:
			m, a := matchArrayElements(nodes, j, l)
			if m {
				return true, true
			}
			sawScalar = sawScalar || a
		default:
			sawScalar = true
			v := nodeValue(n)
			if l.matchValue(&v) {
				return true, true
			}
		}
	}
	return false, sawScalar
}

// arrayCache holds the String.Array values parsed during one match, so a
// policy that tests an attribute in several branches parses it once.
type arrayCache struct {
	entries []arrayEntry
}

type arrayEntry struct {
	name  string
	nodes []node // nil: not a JSON array
}

func (c *arrayCache) get(name, text string) ([]node, bool) {
	for _, e := range c.entries {
		if e.name == name {
			return e.nodes, e.nodes != nil
		}
	}
	nodes, err := parseJSON(text)
	if err != nil || nodes[0].kind != kindArray {
		nodes = nil
	}
	if c.entries == nil {
		c.entries = make([]arrayEntry, 0, 4)
	}
	c.entries = append(c.entries, arrayEntry{name: name, nodes: nodes})
	return nodes, nodes != nil
}

// Match reports whether a message passes the policy, looking at the
// attributes or at the body according to the policy's scope. A nil policy
// passes everything.
func (p *Policy) Match(attrs map[string]Attribute, body string) bool {
	if p == nil {
		return true
	}
	if p.scope == MessageBody {
		return p.MatchParsedBody(ParseBody(body))
	}
	return p.MatchAttributes(attrs)
}
