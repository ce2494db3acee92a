package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicemq/sluice/internal/store"
)

func TestRankIsAPermutation(t *testing.T) {
	members := []string{"n1", "n2", "n3", "n4"}
	for p := store.PartitionID(0); p < 200; p++ {
		seen := map[int]string{}
		for _, n := range members {
			r := rank(members, p, n)
			if other, ok := seen[r]; ok {
				t.Fatalf("partition %d: %s and %s both rank %d", p, n, other, r)
			}
			seen[r] = n
		}
		if got := preferred(members, p); rank(members, p, got) != 0 {
			t.Fatalf("partition %d: preferred %s has rank %d", p, got, rank(members, p, got))
		}
		// A node that is not a member ranks as if it were one.
		if r := rank(members[:3], p, "n4"); r != rank(members, p, "n4") {
			t.Fatalf("partition %d: n4 ranks %d outside, %d inside", p, r, rank(members, p, "n4"))
		}
	}
}

func TestPreferredSpreadsAndMovesLittle(t *testing.T) {
	const parts = 3000
	three := []string{"n1", "n2", "n3"}
	two := []string{"n1", "n2"}
	count := map[string]int{}
	moved := 0
	for p := store.PartitionID(0); p < parts; p++ {
		before := preferred(three, p)
		count[before]++
		after := preferred(two, p)
		if before != "n3" && after != before {
			moved++
		}
	}
	for _, n := range three {
		if c := count[n]; c < parts/3*85/100 || c > parts/3*115/100 {
			t.Errorf("%s is preferred for %d of %d partitions, want about %d", n, c, parts, parts/3)
		}
	}
	if moved != 0 {
		t.Errorf("removing n3 moved %d partitions that n3 did not have", moved)
	}
	if preferred(nil, 1) != "" {
		t.Errorf("preferred of no members is not empty")
	}
}

func TestToken(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"prod", "prod"},
		{"Prod-1_a", "Prod-1_a"},
	} {
		if got := token(tc.in); got != tc.want {
			t.Errorf("token(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"a.b", "a_b", "a b", "a*b", "a>b", "", "é"} {
		got := token(in)
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				t.Errorf("token(%q) = %q holds %q", in, got, r)
			}
		}
		if other, ok := seen[got]; ok {
			t.Errorf("token(%q) = token(%q) = %q", in, other, got)
		}
		seen[got] = in
	}
	if got, want := bucketName("a.b"), token("a.b")+"-leases"; got != want {
		t.Errorf("bucketName = %q, want %q", got, want)
	}
	if p, ok := parsePartKey(partKey(42)); !ok || p != 42 {
		t.Errorf("parsePartKey(partKey(42)) = %d, %v", p, ok)
	}
	for _, k := range []string{"node.n1", "part.", "part.x", "part.-1"} {
		if _, ok := parsePartKey(k); ok {
			t.Errorf("parsePartKey(%q) succeeded", k)
		}
	}
}

func TestConfig(t *testing.T) {
	conn := &nats.Conn{}
	ok := Config{Conn: conn, Cluster: "c", Node: "n1"}
	for _, tc := range []struct {
		name   string
		edit   func(*Config)
		wantOK bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no conn", func(c *Config) { c.Conn = nil }, false},
		{"no cluster", func(c *Config) { c.Cluster = "" }, false},
		{"no node", func(c *Config) { c.Node = "" }, false},
		{"replicas 1", func(c *Config) { c.Replicas = 1 }, true},
		{"replicas 7", func(c *Config) { c.Replicas = 7 }, false},
		{"replicas -1", func(c *Config) { c.Replicas = -1 }, false},
		{"ttl 2s", func(c *Config) { c.LeaseTTL = 2 * time.Second }, true},
		{"ttl 1s", func(c *Config) { c.LeaseTTL = time.Second }, false},
		{"ttl 2.5s", func(c *Config) { c.LeaseTTL = 2500 * time.Millisecond }, false},
		{"negative tick", func(c *Config) { c.Tick = -time.Second }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			c = c.withDefaults()
			err := c.validate()
			if (err == nil) != tc.wantOK {
				t.Fatalf("validate() = %v, want ok %v", err, tc.wantOK)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("validate() = %v, not an ErrConfig", err)
			}
		})
	}
	c := ok.withDefaults()
	if c.Replicas != 3 || c.LeaseTTL != 6*time.Second || c.Tick != 500*time.Millisecond ||
		c.RankStep != time.Second || c.Settle != 10*time.Second || c.Logger == nil {
		t.Errorf("defaults: %+v", c)
	}
	if _, err := Start(t.Context(), Config{Cluster: "c", Node: "n"}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Start without a connection = %v", err)
	}
}
