package cluster

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/internal/natsnode/natstest"
)

// Every node that answers a question is heard, in JSON; answers merge by
// name, sorted, one per name.
func TestAskEveryNode(t *testing.T) {
	node := natstest.Single(t)
	nc, err := node.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s := Subjects("Test.Cluster")
	for _, names := range [][]string{{"b", "a"}, {"c", "a"}} {
		sub, err := Answer(nc, s, "names", func(data []byte) any {
			out := []item{}
			for _, n := range names {
				out = append(out, item{Name: n, From: string(data)})
			}
			return out
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	answers, err := Ask(context.Background(), nc, s, "names", []byte("q"), 2)
	if err != nil || len(answers) != 2 {
		t.Fatalf("%d answers of 2: %v", len(answers), err)
	}
	got := ByName(answers, func(i item) string { return i.Name })
	if !slices.EqualFunc(got, []string{"a", "b", "c"}, func(i item, n string) bool { return i.Name == n && i.From == "q" }) {
		t.Fatalf("merged: %+v", got)
	}
	// A question nobody answers: nothing, after the wait, and no error.
	if answers, err := Ask(context.Background(), nc, s, "nobody", nil, 1); err != nil || len(answers) != 0 {
		t.Fatalf("unanswered question: %d answers, %v", len(answers), err)
	}
}

type item struct {
	Name string `json:"name"`
	From string `json:"from"`
}
