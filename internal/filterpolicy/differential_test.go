package filterpolicy

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestBodyMatchAgainstReference compares the tree walk of body.go with
// the naive reference model on random policies and bodies drawn from a
// small vocabulary, so that keys collide, dotted keys overlap nested ones,
// and arrays nest. The seed is fixed: a failure reproduces.
func TestBodyMatchAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := 20000
	if testing.Short() {
		cases = 2000
	}
	matched, compared := 0, 0
	for range cases {
		policy := randPolicy(rng, 0)
		p, err := Parse(policy, MessageBody)
		if err != nil || p == nil {
			continue
		}
		for range 5 {
			body := randBody(rng, 0)
			want, ok := naiveMatchBodyOK(p, body)
			if !ok {
				continue
			}
			compared++
			got := p.MatchBody([]byte(body))
			if got != want {
				t.Fatalf("MatchBody = %v, reference model = %v\npolicy %s\nbody   %s", got, want, policy, body)
			}
			if got {
				matched++
			}
		}
	}
	// Guard against a generator that never exercises one side.
	if compared < cases || matched < compared/20 || matched > compared*19/20 {
		t.Fatalf("%d compared, %d matched: the generator is off", compared, matched)
	}
}

var (
	randKeys   = []string{"a", "b", "a.b", "b.a", "c"}
	randScalar = []string{`"x"`, `"y"`, `"xy"`, `1`, `2.5`, `true`, `null`}
	randValues = []string{`"x"`, `"y"`, `1`, `null`, `true`, `{"exists":true}`, `{"exists":false}`,
		`{"anything-but":"x"}`, `{"anything-but":[1]}`, `{"prefix":"x"}`, `{"numeric":[">",1]}`}
)

func pick(rng *rand.Rand, from []string) string { return from[rng.IntN(len(from))] }

func randPolicy(rng *rand.Rand, depth int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range 1 + rng.IntN(3) {
		if i > 0 {
			b.WriteByte(',')
		}
		switch r := rng.IntN(10); {
		case r < 1 && depth < 2:
			b.WriteString(`"$or":[` + randPolicy(rng, depth+1) + "," + randPolicy(rng, depth+1) + "]")
		case r < 3 && depth < 2:
			b.WriteString(`"` + pick(rng, randKeys) + `":` + randPolicy(rng, depth+1))
		default:
			b.WriteString(`"` + pick(rng, randKeys) + `":[` + pick(rng, randValues))
			if rng.IntN(3) == 0 {
				b.WriteString("," + pick(rng, randValues))
			}
			b.WriteByte(']')
		}
	}
	b.WriteByte('}')
	return b.String()
}

func randBody(rng *rand.Rand, depth int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range rng.IntN(4) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + pick(rng, randKeys) + `":` + randBodyValue(rng, depth+1))
	}
	b.WriteByte('}')
	return b.String()
}

func randBodyValue(rng *rand.Rand, depth int) string {
	switch r := rng.IntN(10); {
	case r < 2 && depth < 3:
		return randBody(rng, depth)
	case r < 4 && depth < 3:
		elems := make([]string, rng.IntN(4))
		for i := range elems {
			elems[i] = randBodyValue(rng, depth+1)
		}
		return "[" + strings.Join(elems, ",") + "]"
	default:
		return pick(rng, randScalar)
	}
}
