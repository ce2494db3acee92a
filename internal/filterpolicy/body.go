package filterpolicy

// Body matching (scope MessageBody) follows the rules AWS documents and
// LocalStack's AWS-validated tests record:
//
//   - A property's path is its keys joined with ".", and a policy key
//     matches a path the same way, so the policy key "a.b.c" (or the
//     policy {"a": {"b": {"c": ...}}}) matches {"a":{"b":{"c":..}}},
//     {"a.b.c":..}, {"a.b":{"c":..}} and {"a":{"b.c":..}}.
//   - Arrays are transparent: a property inside an array, or inside an
//     array of arrays, has the path of the array. An array value matches
//     if any element matches.
//   - The conditions of one branch that reach into the same array must be
//     met by one element of it ({"Records": {"eventName": ..., "s3":
//     ...}} is met by one record, never by two records each meeting half).
//     This is event-ruler's array consistency.
//   - Only scalars are values: a path that ends at an object, or at an
//     empty array, has no value, so {"exists": true} fails and
//     {"exists": false} holds there.
//
// The evaluation walks the document once per branch, carrying the
// branch's leaves down the tree together; where they go down one array
// they must all succeed in one element. It visits only the parts of the
// body on the leaves' paths, each at most once per leaf, except where a
// leaf could follow more than one key (a body with both "a" and "a.b", or
// a duplicate key); those choices are searched, within a budget (see
// choiceBudget). reference_test.go holds the naive model it is tested
// against.

// Body is a message body parsed once for matching, so a publish can test
// every subscription's policy against one parse.
type Body struct {
	nodes []node // nodes[0] is an object
}

// ParseBody parses a message body for MatchParsedBody. It returns nil if
// the body is not a JSON object, which no policy of scope MessageBody
// matches.
func ParseBody(body string) *Body {
	nodes := parseBody(body)
	if nodes == nil {
		return nil
	}
	return &Body{nodes: nodes}
}

// parseBody is the nodes of a body that is a JSON object, else nil.
func parseBody(body string) []node {
	nodes, err := parseJSON(body)
	if err != nil || nodes[0].kind != kindObject {
		return nil
	}
	return nodes
}

// MatchBody reports whether a message with this body passes the policy
// (scope MessageBody). A nil policy passes everything; otherwise the body
// must be a JSON object.
func (p *Policy) MatchBody(body []byte) bool {
	if p == nil {
		return true
	}
	nodes := parseBody(string(body))
	if nodes == nil {
		return false
	}
	return p.matchNodes(nodes)
}

// MatchParsedBody is MatchBody on a body parsed by ParseBody; a nil body
// (not a JSON object) passes only a nil policy.
func (p *Policy) MatchParsedBody(b *Body) bool {
	if p == nil {
		return true
	}
	if b == nil {
		return false
	}
	return p.matchNodes(b.nodes)
}

// matchNodes matches a parsed body object.
func (p *Policy) matchNodes(nodes []node) bool {
	scratch := new(matchScratch) // one allocation for both stacks, sized for common policies
	m := bodyMatcher{nodes: nodes, groups: scratch.groups[:0], routes: scratch.routes[:0], budget: choiceBudget}
	for _, branch := range p.branches {
		if m.matchBranch(branch) {
			return true
		}
	}
	return false
}

// choiceBudget bounds the alternatives tried, in one match, where a leaf
// could follow several keys of an object. Real bodies need a handful; a
// body and policy built to make the search explode (many leaves, each
// matching alone under several duplicate keys, but not together) stop
// matching instead.
const choiceBudget = 1 << 14

// pending is a leaf on its way down the document: off bytes of its path
// have been matched by the keys above the current node, and arrived says
// the last of them ended the path (rather than ending in the "." before
// one more key, which may be "").
type pending struct {
	leaf    *leaf
	off     int
	arrived bool
}

// route is where a pending leaf goes in an object: to child, in the state
// given.
type route struct {
	child   int
	off     int
	arrived bool
}

// matchScratch is the initial room of a bodyMatcher's stacks.
type matchScratch struct {
	groups [16]pending
	routes [16]route
}

// bodyMatcher holds one match's state. groups and routes are stacks that
// each level of the walk pushes onto and truncates on return, so a match
// allocates only while they grow.
type bodyMatcher struct {
	nodes  []node
	groups []pending
	routes []route
	budget int
}

func (m *bodyMatcher) matchBranch(branch []*leaf) bool {
	m.groups = m.groups[:0]
	for _, l := range branch {
		if l.absentOK && !m.present(0, l.path, 0, false) {
			continue // {"exists": false} holds
		}
		if !l.hasValueConditions() {
			return false
		}
		m.groups = append(m.groups, pending{leaf: l})
	}
	if len(m.groups) == 0 {
		return true
	}
	return m.matchGroup(0, m.groups)
}

// present reports whether the path (from byte off on, arrived as in
// pending) leads from node i to at least one scalar.
func (m *bodyMatcher) present(i int, path string, off int, arrived bool) bool {
	n := &m.nodes[i]
	switch n.kind {
	case kindArray:
		for j := i + 1; j < int(n.end); j = int(m.nodes[j].end) {
			if m.present(j, path, off, arrived) {
				return true
			}
		}
		return false
	case kindObject:
		if arrived {
			return false
		}
		for j := i + 1; j < int(n.end); j = int(m.nodes[j].end) {
			if next, end, ok := follow(path, off, m.nodes[j].key); ok && m.present(j, path, next, end) {
				return true
			}
		}
		return false
	default:
		return arrived
	}
}

// follow reports whether a path, matched up to byte off, continues with
// key, how much of it is matched then, and whether key ends it.
func follow(path string, off int, key string) (next int, arrived, ok bool) {
	rest := path[off:]
	if rest == key {
		return len(path), true, true
	}
	if len(rest) > len(key) && rest[len(key)] == '.' && rest[:len(key)] == key {
		return off + len(key) + 1, false, true
	}
	return 0, false, false
}

// matchGroup reports whether every leaf of group is satisfied at node i,
// all of them within the same element of any array on the way.
func (m *bodyMatcher) matchGroup(i int, group []pending) bool {
	n := &m.nodes[i]
	switch n.kind {
	case kindArray:
		for j := i + 1; j < int(n.end); j = int(m.nodes[j].end) {
			if m.matchGroup(j, group) {
				return true
			}
		}
		return false
	case kindObject:
		for _, p := range group {
			if p.arrived {
				return false // an object is not a value
			}
		}
		return m.matchObject(i, group)
	default:
		v := nodeValue(n)
		for _, p := range group {
			if !p.arrived || !p.leaf.matchValue(&v) {
				return false
			}
		}
		return true
	}
}

// matchObject routes each leaf of group to the child of object i its path
// continues with, and requires every child's leaves to be satisfied there.
func (m *bodyMatcher) matchObject(i int, group []pending) bool {
	base := len(m.routes)
	defer func() { m.routes = m.routes[:base] }()
	ambiguous := false
	for _, p := range group {
		found := 0
		for j := i + 1; j < int(m.nodes[i].end); j = int(m.nodes[j].end) {
			if off, arrived, ok := follow(p.leaf.path, p.off, m.nodes[j].key); ok {
				if found == 0 {
					m.routes = append(m.routes, route{child: j, off: off, arrived: arrived})
				}
				found++
			}
		}
		if found == 0 {
			return false
		}
		ambiguous = ambiguous || found > 1
	}
	routes := m.routes[base : base+len(group)]
	if !ambiguous {
		return m.matchRoutes(group, routes)
	}
	return m.chooseAmongKeys(i, group, routes)
}

// chooseAmongKeys handles an object where some leaf could follow more
// than one key (a body with both "a" and "a.b", or a duplicate key). Each
// leaf may go to any child where it matches on its own; leaves that go to
// the same child must also match together there. The search is over those
// choices, within the match's budget. This path is rare, so it may
// allocate.
func (m *bodyMatcher) chooseAmongKeys(i int, group []pending, routes []route) bool {
	choices := make([][]route, len(group))
	for k, p := range group {
		for j := i + 1; j < int(m.nodes[i].end); j = int(m.nodes[j].end) {
			off, arrived, ok := follow(p.leaf.path, p.off, m.nodes[j].key)
			if !ok {
				continue
			}
			if m.budget <= 0 {
				return false
			}
			m.budget--
			base := len(m.groups)
			m.groups = append(m.groups, pending{leaf: p.leaf, off: off, arrived: arrived})
			alone := m.matchGroup(j, m.groups[base:])
			m.groups = m.groups[:base]
			if alone {
				choices[k] = append(choices[k], route{child: j, off: off, arrived: arrived})
			}
		}
		if len(choices[k]) == 0 {
			return false
		}
	}
	return m.chooseRoutes(group, choices, routes, 0)
}

// chooseRoutes tries the choices of the leaves from position k on, until
// one assignment of leaves to children matches.
func (m *bodyMatcher) chooseRoutes(group []pending, choices [][]route, routes []route, k int) bool {
	if k == len(group) {
		return m.matchRoutes(group, routes)
	}
	for _, r := range choices[k] {
		if m.budget <= 0 {
			return false
		}
		m.budget--
		routes[k] = r
		if m.chooseRoutes(group, choices, routes, k+1) {
			return true
		}
	}
	return false
}

// matchRoutes gathers the leaves routed to the same child and matches
// each child with its leaves.
func (m *bodyMatcher) matchRoutes(group []pending, routes []route) bool {
	for k, r := range routes {
		if routedBefore(routes, k) {
			continue // gathered with an earlier leaf
		}
		base := len(m.groups)
		for h := k; h < len(routes); h++ {
			if routes[h].child == r.child {
				m.groups = append(m.groups, pending{leaf: group[h].leaf, off: routes[h].off, arrived: routes[h].arrived})
			}
		}
		ok := m.matchGroup(r.child, m.groups[base:])
		m.groups = m.groups[:base]
		if !ok {
			return false
		}
	}
	return true
}

// routedBefore reports whether a leaf before position k goes to the same
// child as the leaf at k.
func routedBefore(routes []route, k int) bool {
	for _, r := range routes[:k] {
		if r.child == routes[k].child {
			return true
		}
	}
	return false
}
