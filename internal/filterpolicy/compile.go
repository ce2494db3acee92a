package filterpolicy

import (
	"net/netip"
	"slices"
)

// The compiler walks a parsed policy document in document order and
// refuses it with the first reason AWS's streaming rule compiler would
// meet. The reasons, and the order of the checks inside one match
// expression, are AWS's where AWS's answer is recorded (LocalStack's
// AWS-validated snapshots) and event-ruler's (the open-source rule
// compiler those reasons come from) where it is not.

// orKeyword is the key that introduces an $or relationship.
const orKeyword = "$or"

// isReservedInOr reports the names that, used as a key inside an $or
// alternative, make "$or" an ordinary key (event-ruler's list, which AWS's
// "reserved keywords" refers to).
func isReservedInOr(name string) bool {
	switch name {
	case "exactly", "equals-ignore-case", "prefix", "suffix", "anything-but", "exists", "wildcard", "numeric", "cidr",
		"=", "<", "<=", ">", ">=",
		"regex", "not-wildcard", "not-equals-ignore-case",
		"date-after", "date-on-or-after", "date-before", "date-on-or-before", "in-date-range",
		"ip-address-in-range", "ip-address-not-in-range":
		return true
	}
	return false
}

type compiler struct {
	nodes []node
	// reserved[i] reports, for an object node, whether a reserved keyword
	// is a key in it or in an object nested in it (through objects and
	// $or arrays, not through value lists). It is computed once, bottom
	// up, so that deciding every "$or" of a deeply nested policy stays
	// linear.
	reserved []bool
}

func newCompiler(nodes []node) *compiler {
	c := &compiler{nodes: nodes, reserved: make([]bool, len(nodes))}
	// In pre-order every child follows its parent, so walking backwards
	// sees a node's children before the node.
	for i := len(nodes) - 1; i >= 0; i-- {
		if nodes[i].kind != kindObject {
			continue
		}
		for j := i + 1; j < int(nodes[i].end) && !c.reserved[i]; j = int(nodes[j].end) {
			n := &nodes[j]
			switch {
			case isReservedInOr(n.key):
				c.reserved[i] = true
			case n.kind == kindObject:
				c.reserved[i] = c.reserved[j]
			case n.kind == kindArray && n.key == orKeyword:
				for k := j + 1; k < int(n.end); k = int(nodes[k].end) {
					if c.reserved[k] {
						c.reserved[i] = true
					}
				}
			}
		}
	}
	return c
}

// children calls f with the index of each child of node i, in order, and
// stops at the first error.
func (c *compiler) children(i int, f func(j int) *Error) *Error {
	for j := i + 1; j < int(c.nodes[i].end); j = int(c.nodes[j].end) {
		if err := f(j); err != nil {
			return err
		}
	}
	return nil
}

// childList is the indexes of the children of node i.
func (c *compiler) childList(i int) []int {
	var out []int
	for j := i + 1; j < int(c.nodes[i].end); j = int(c.nodes[j].end) {
		out = append(out, j)
	}
	return out
}

// object compiles the policy object at node i.
func (c *compiler) object(i int) (*objectPattern, *Error) {
	if c.nodes[i].end == int32(i+1) {
		return nil, policyError("Empty objects are not allowed")
	}
	o := &objectPattern{}
	err := c.children(i, func(j int) *Error {
		n := &c.nodes[j]
		m := member{key: n.key}
		switch {
		case n.key == orKeyword && c.isOr(j):
			for _, b := range c.childList(j) {
				alt, err := c.object(b)
				if err != nil {
					return err
				}
				m.or = append(m.or, alt)
			}
		case n.kind == kindObject:
			nested, err := c.object(j)
			if err != nil {
				return err
			}
			m.nested = nested
		case n.kind == kindArray:
			l, count, err := c.values(j)
			if err != nil {
				return err
			}
			m.leaf, m.values = l, count
		default:
			return policyError("\"" + n.key + "\" must be an object or an array")
		}
		o.members = append(o.members, m)
		return nil
	})
	return o, err
}

// isOr reports whether the "$or" key at node i is an $or relationship: AWS
// honours one only when its value is an array of at least two objects and
// no key inside those objects is a reserved keyword. Otherwise "$or" is an
// ordinary key.
func (c *compiler) isOr(i int) bool {
	if c.nodes[i].kind != kindArray {
		return false
	}
	alts := c.childList(i)
	if len(alts) < 2 {
		return false
	}
	for _, j := range alts {
		if c.nodes[j].kind != kindObject || c.reserved[j] {
			return false
		}
	}
	return true
}

// values compiles the list of values of a key (node i is the array).
func (c *compiler) values(i int) (*leaf, int, *Error) {
	l := &leaf{}
	count := 0
	err := c.children(i, func(j int) *Error {
		count++
		n := &c.nodes[j]
		switch n.kind {
		case kindString:
			l.strs = append(l.strs, n.text)
			if addr, ok := parseIP(n.text); ok {
				l.ips = append(l.ips, addr)
			}
		case kindNumber:
			scaled, _, ok := scaleNumber(n.text)
			l.nums = append(l.nums, exactNumber{text: n.text, scaled: scaled, ok: ok})
		case kindTrue:
			l.true_ = true
		case kindFalse:
			l.false_ = true
		case kindNull:
			l.null = true
		case kindObject:
			return c.matchExpression(j, l)
		default:
			return policyError("Match value must be String, number, true, false, or null")
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if count == 0 {
		return nil, 0, policyError("Empty arrays are not allowed")
	}
	slices.Sort(l.strs)
	l.strs = slices.Compact(l.strs)
	return l, count, nil
}

// matchExpression compiles an operator object ({"prefix": "a"}, ...) at
// node i into l. Its first key decides the operator; a second key is
// refused after the first key's value has been checked, as a streaming
// parser meets them.
func (c *compiler) matchExpression(i int, l *leaf) *Error {
	keys := c.childList(i)
	if len(keys) == 0 {
		return policyError("Match expression name not found")
	}
	v := &c.nodes[keys[0]]
	onlyOne := func() *Error {
		if len(keys) > 1 {
			return policyError("Only one key allowed in match expression")
		}
		return nil
	}
	switch name := v.key; name {
	case "prefix", "suffix", "equals-ignore-case":
		if v.kind != kindString {
			return policyError(name + " match pattern must be a string")
		}
		if err := onlyOne(); err != nil {
			return err
		}
		kind := opPrefix
		switch name {
		case "suffix":
			kind = opSuffix
		case "equals-ignore-case":
			kind = opEqualsIgnoreCase
		}
		l.ops = append(l.ops, matcher{kind: kind, str: v.text})
	case "anything-but":
		m, err := c.anythingBut(keys[0])
		if err != nil {
			return err
		}
		if len(keys) > 1 {
			return policyError("Too many elements in numeric expression") // sic: AWS's rule compiler says so
		}
		l.ops = append(l.ops, m)
	case "numeric":
		r, err := c.numeric(keys[0])
		if err != nil {
			return err
		}
		if len(keys) > 1 {
			return policyError("Too many elements in numeric expression")
		}
		l.ops = append(l.ops, matcher{kind: opNumeric, rng: r})
	case "exists":
		if v.kind != kindTrue && v.kind != kindFalse {
			return policyError("exists match pattern must be either true or false.")
		}
		if err := onlyOne(); err != nil {
			return err
		}
		if v.kind == kindTrue {
			l.existsTrue = true
		} else {
			l.absentOK = true
		}
	case "cidr":
		if v.kind != kindString {
			return policyError("prefix match pattern must be a string") // sic: AWS-recorded
		}
		prefix, err := parseCIDR(v.text)
		if err != nil {
			return err
		}
		if err := onlyOne(); err != nil {
			return err
		}
		l.ops = append(l.ops, matcher{kind: opCIDR, cidr: prefix})
	default:
		return policyError("Unrecognized match type " + name)
	}
	return nil
}

// anythingBut compiles the value of an anything-but (node i): a string or
// number, a list of strings or of numbers, or {"prefix": "..."}. AWS
// refused the other nested operators (suffix, exists) when last recorded
// (2024-05); equals-ignore-case and wildcard are refused here as well.
func (c *compiler) anythingBut(i int) (matcher, *Error) {
	n := &c.nodes[i]
	switch n.kind {
	case kindObject:
		keys := c.childList(i)
		if len(keys) == 0 {
			return matcher{}, policyError("Anything-But expression name not found")
		}
		v := &c.nodes[keys[0]]
		if v.key != "prefix" {
			return matcher{}, policyError("Unsupported anything-but pattern: " + v.key)
		}
		if v.kind != kindString {
			return matcher{}, policyError("prefix match pattern must be a string")
		}
		if v.text == "" {
			return matcher{}, policyError("Null prefix/suffix not allowed")
		}
		if len(keys) > 1 {
			return matcher{}, policyError("Only one key allowed in match expression")
		}
		return matcher{kind: opAnythingButPrefix, str: v.text}, nil
	case kindString:
		return matcher{kind: opAnythingButStrings, strs: []string{n.text}}, nil
	case kindNumber:
		scaled, err := policyNumber(n.text)
		if err != nil {
			return matcher{}, err
		}
		return matcher{kind: opAnythingButNumbers, nums: []int64{scaled}}, nil
	case kindArray:
		var strs []string
		var nums []int64
		err := c.children(i, func(j int) *Error {
			e := &c.nodes[j]
			switch e.kind {
			case kindString:
				strs = append(strs, e.text)
			case kindNumber:
				scaled, err := policyNumber(e.text)
				if err != nil {
					return err
				}
				nums = append(nums, scaled)
			default:
				return policyError("Inside anything but list, start|null|boolean is not supported.")
			}
			return nil
		})
		if err != nil {
			return matcher{}, err
		}
		if (len(strs) > 0) == (len(nums) > 0) {
			return matcher{}, policyError("Inside anything but list, either all values are number or string, mixed type is not supported")
		}
		if len(strs) > 0 {
			slices.Sort(strs)
			return matcher{kind: opAnythingButStrings, strs: slices.Compact(strs)}, nil
		}
		slices.Sort(nums)
		return matcher{kind: opAnythingButNumbers, nums: slices.Compact(nums)}, nil
	default:
		return matcher{}, policyError("Value of anything-but must be an array or single string/number value.")
	}
}

// numeric compiles the value of a numeric condition (node i):
// ["=", n], [">"|">="|"<"|"<=", n], or [">"|">=", lo, "<"|"<=", hi].
// Each malformed shape gets the reason AWS gives for it (AWS-recorded),
// including the quirks: a missing number after "=" is "Value of equals
// must be numeric", an extra element after "<" is "Too many elements in
// numeric expression", and a non-string where the second operator belongs
// is "Bad value in numeric range: <it>".
func (c *compiler) numeric(i int) (numericRange, *Error) {
	if c.nodes[i].kind != kindArray {
		return numericRange{}, policyError("Value of numeric must be an array.")
	}
	elems := c.childList(i)
	if len(elems) == 0 {
		return numericRange{}, policyError("Invalid member in numeric match: ]")
	}
	first := &c.nodes[elems[0]]
	if first.kind != kindString {
		return numericRange{}, policyError("Invalid member in numeric match: " + tokenText(first))
	}
	isNumber := func(k int) bool { return k < len(elems) && c.nodes[elems[k]].kind == kindNumber }
	var r numericRange
	switch op := first.text; op {
	case "=":
		if !isNumber(1) {
			return r, policyError("Value of equals must be numeric")
		}
		if len(elems) > 2 {
			return r, policyError("Too many elements in numeric expression")
		}
		n, err := policyNumber(c.nodes[elems[1]].text)
		if err != nil {
			return r, err
		}
		return numericRange{lo: n, hi: n, hasLo: true, hasHi: true}, nil
	case "<", "<=":
		if !isNumber(1) {
			return r, policyError("Value of " + op + " must be numeric")
		}
		if len(elems) > 2 {
			return r, policyError("Too many elements in numeric expression")
		}
		n, err := policyNumber(c.nodes[elems[1]].text)
		if err != nil {
			return r, err
		}
		return numericRange{hi: n, hasHi: true, hiOpen: op == "<"}, nil
	case ">", ">=":
		if !isNumber(1) {
			return r, policyError("Value of " + op + " must be numeric")
		}
		r = numericRange{hasLo: true, loOpen: op == ">"}
		if len(elems) > 2 {
			second := &c.nodes[elems[2]]
			if second.kind != kindString {
				return r, policyError("Bad value in numeric range: " + tokenText(second))
			}
			op2 := second.text
			if op2 != "<" && op2 != "<=" {
				return r, policyError("Bad numeric range operator: " + op2)
			}
			if !isNumber(3) {
				return r, policyError("Value of " + op2 + " must be numeric")
			}
			if len(elems) > 4 {
				return r, policyError("Too many terms in numeric range expression")
			}
			hi, err := policyNumber(c.nodes[elems[3]].text)
			if err != nil {
				return r, err
			}
			r.hi, r.hasHi, r.hiOpen = hi, true, op2 == "<"
		}
		lo, err := policyNumber(c.nodes[elems[1]].text)
		if err != nil {
			return r, err
		}
		r.lo = lo
		if r.hasHi && r.lo >= r.hi {
			return r, policyError("Bottom must be less than top")
		}
		return r, nil
	default:
		return r, policyError("Unrecognized numeric range operator: " + op)
	}
}

// policyNumber is a number an operator compares with: it must be within
// ±10^9. (A number listed as an exact value may be anything; outside the
// range it is matched by its text, as AWS matches account numbers.)
func policyNumber(text string) (int64, *Error) {
	scaled, _, ok := scaleNumber(text)
	if !ok {
		return 0, policyError(numberRangeReason)
	}
	return scaled, nil
}

// tokenText is how Jackson prints the token a node starts with.
func tokenText(n *node) string {
	switch n.kind {
	case kindObject:
		return "{"
	case kindArray:
		return "["
	default:
		return n.text
	}
}

// ipEqual reports whether addr is one of the addresses in addrs.
func ipEqual(addrs []netip.Addr, addr netip.Addr) bool {
	return slices.Contains(addrs, addr)
}
