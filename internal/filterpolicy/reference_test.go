package filterpolicy

// A naive reference model of body matching, for differential tests of the
// tree walk in body.go. It spells the semantics out the slow way: a body
// is expanded into every "flattening" (one element chosen from each array,
// recursively; every scalar reached is recorded under its dotted path),
// and a branch matches if one flattening holds a matching value for each
// leaf, or the leaf allows absence and no flattening has its path at all.
// Its cost is exponential in the arrays of the body, so it runs on small
// bodies only.

// flatPair is one scalar of a flattening and its path.
type flatPair struct {
	path string
	node *node
}

// maxFlattenings bounds the reference model's work; naiveMatchBody
// reports ok=false past it.
const maxFlattenings = 4096

// flatten returns the flattenings of the value at nodes[i], whose path is
// path (for a scalar) or whose members' paths start with prefix.
func flatten(nodes []node, i int, path string) ([][]flatPair, bool) {
	n := &nodes[i]
	switch n.kind {
	case kindArray:
		var out [][]flatPair
		empty := true
		for j := i + 1; j < int(n.end); j = int(nodes[j].end) {
			empty = false
			sub, ok := flatten(nodes, j, path)
			if !ok {
				return nil, false
			}
			out = append(out, sub...)
			if len(out) > maxFlattenings {
				return nil, false
			}
		}
		if empty {
			return [][]flatPair{nil}, true
		}
		return out, true
	case kindObject:
		out := [][]flatPair{nil}
		prefix := ""
		if i != 0 {
			prefix = path + "."
		}
		for j := i + 1; j < int(n.end); j = int(nodes[j].end) {
			sub, ok := flatten(nodes, j, prefix+nodes[j].key)
			if !ok {
				return nil, false
			}
			var next [][]flatPair
			for _, a := range out {
				for _, b := range sub {
					next = append(next, append(append([]flatPair(nil), a...), b...))
				}
			}
			if len(next) > maxFlattenings {
				return nil, false
			}
			out = next
		}
		return out, true
	default:
		return [][]flatPair{{{path: path, node: n}}}, true
	}
}

// naiveMatchBody is MatchBody by the reference model. It panics if the
// body is too big for the model.
func naiveMatchBody(p *Policy, body string) bool {
	got, ok := naiveMatchBodyOK(p, body)
	if !ok {
		panic("body too big for the reference model")
	}
	return got
}

func naiveMatchBodyOK(p *Policy, body string) (match, ok bool) {
	if p == nil {
		return true, true
	}
	nodes, err := parseJSON(body)
	if err != nil || nodes[0].kind != kindObject {
		return false, true
	}
	flats, ok := flatten(nodes, 0, "")
	if !ok {
		return false, false
	}
	present := map[string]bool{}
	for _, f := range flats {
		for _, pair := range f {
			present[pair.path] = true
		}
	}
	for _, branch := range p.branches {
		for _, f := range flats {
			if naiveBranchHolds(branch, f, present) {
				return true, true
			}
		}
	}
	return false, true
}

func naiveBranchHolds(branch []*leaf, f []flatPair, present map[string]bool) bool {
	for _, l := range branch {
		if l.absentOK && !present[l.path] {
			continue
		}
		held := false
		for _, pair := range f {
			if pair.path != l.path {
				continue
			}
			v := nodeValue(pair.node)
			if l.matchValue(&v) {
				held = true
				break
			}
		}
		if !held {
			return false
		}
	}
	return true
}
