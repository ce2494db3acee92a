package attr

import (
	"strings"
	"testing"

	st "github.com/sluicemq/sluice/sluicetype"
)

// All answers what SQS would; Sluice's computed attributes only by name;
// an unknown name is refused, naming it.
func TestSelect(t *testing.T) {
	m := func() map[string]string {
		return map[string]string{"VisibilityTimeout": "30", "QueueArn": "arn", "ApproximateNumberOfTenants": "3"}
	}
	all, err := Select([]string{"All"})
	if err != nil {
		t.Fatal(err)
	}
	if got := all.Keep(m()); len(got) != 2 || got["ApproximateNumberOfTenants"] != "" || all.AnySluice() {
		t.Fatalf("All kept %v (AnySluice %v)", got, all.AnySluice())
	}
	named, err := Select([]string{"All", "ApproximateNumberOfTenants"})
	if err != nil {
		t.Fatal(err)
	}
	if got := named.Keep(m()); len(got) != 3 || !named.AnySluice() {
		t.Fatalf("All and a Sluice name kept %v", got)
	}
	one, _ := Select([]string{"QueueArn"})
	if got := one.Keep(m()); len(got) != 1 || got["QueueArn"] != "arn" {
		t.Fatalf("QueueArn kept %v", got)
	}
	if _, err := Select([]string{"QueueArn", "Nope"}); st.CodeOf(err) != st.CodeInvalidAttributeName || !strings.Contains(err.Error(), "Nope") {
		t.Fatalf("unknown name: %v", err)
	}
}
