package attr

import (
	"maps"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/internal/record"
)

// The former names of renamed attributes are still accepted: set (stored
// under the current name, replacing a value stored under the former),
// read from settings written under them, and answered when asked for by
// name; All answers with the current name only.
func TestFormerNames(t *testing.T) {
	got, err := Validate(map[string]string{"Partitions": "4", "PartitionsPerTenant": "2"}, false, true)
	if err != nil || !maps.Equal(got, map[string]string{"Shards": "4", "ShardsPerTenant": "2"}) {
		t.Fatalf("Validate: %v %v", got, err)
	}
	if _, err := Validate(map[string]string{"Partitions": "4", "Shards": "8"}, false, true); err == nil {
		t.Fatal("a former and a current name with two values were taken")
	}
	if _, err := Validate(map[string]string{"Partitions": "0"}, false, true); err == nil || !strings.Contains(err.Error(), "Partitions") {
		t.Fatalf("an invalid value under the former name: %v (must name it)", err)
	}

	old := &record.QueueMeta{Attrs: map[string]string{"Partitions": "3", "PartitionsPerTenant": "1"}}
	if c := Parse(old); c.Shards != 3 || c.Queue.Sched.Shards != 3 || c.Queue.Sched.ShardsPerTenant != 1 {
		t.Fatalf("settings written under the former names read as %d, %d, %d", c.Shards, c.Queue.Sched.Shards, c.Queue.Sched.ShardsPerTenant)
	}
	r := Render(old)
	if r["Shards"] != "3" || r["Partitions"] != "" {
		t.Fatalf("Render: Shards %q, Partitions %q", r["Shards"], r["Partitions"])
	}
	s, err := Select([]string{"Partitions"})
	if err != nil {
		t.Fatal(err)
	}
	if kept := s.Keep(Render(old)); kept["Partitions"] != "3" {
		t.Fatalf("asked for by its former name: %v", kept)
	}
	all, _ := Select([]string{"All"})
	if kept := all.Keep(Render(old)); kept["Partitions"] != "" || kept["Shards"] != "3" {
		t.Fatalf("All: %v", kept)
	}

	attrs := maps.Clone(old.Attrs)
	Apply(attrs, map[string]string{"Shards": "5"})
	if attrs["Partitions"] != "" || attrs["Shards"] != "5" {
		t.Fatalf("a new value left the one under the former name: %v", attrs)
	}
}
