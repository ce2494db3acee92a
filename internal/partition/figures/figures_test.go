package figures

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/sched"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A tenant with more than twice its share of the backlog is noisy; the
// age of the oldest message among the quiet ones leaves it out.
func TestNoisyAndQuietAge(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ts := []sched.TenantStats{
		{Name: "big", Ready: 1000, Oldest: now.UnixMilli() - 600_000, Lanes: []int{1000, 0}},
		{Name: "a", Ready: 5, Oldest: now.UnixMilli() - 3_000, Lanes: []int{5, 0}},
		{Name: "b", Ready: 5, Oldest: now.UnixMilli() - 2_000, Lanes: []int{4, 1}},
	}
	c := queue.Counts{Visible: 1010, OldestSent: now.UnixMilli() - 600_000}
	a := Attributes(now, c, queue.Stats{Sidelined: 2, DroppedMaxAge: 1, DroppedRetention: 2}, ts)
	want := map[string]string{"ApproximateAgeOfOldestMessage": "600", "ApproximateNumberOfTenants": "3",
		"ApproximateNumberOfNoisyGroups": "1", "ApproximateAgeOfOldestMessageInQuietGroups": "3",
		"ApproximateNumberOfMessagesSidelined": "2", "ApproximateNumberOfMessagesDropped": "3"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s = %q, want %q", k, a[k], v)
		}
	}
	var ctr Counters
	ctr.ObserveFirstAttempt(1500 * time.Millisecond)
	s := Queue(State{Now: now, Name: "q", Counts: c, Tenants: ts}, &ctr)
	if s.NoisyTenants != 1 || s.QuietOldestAge != 3*time.Second || s.NoisyOldestAge != 10*time.Minute {
		t.Errorf("noisy %d, quiet oldest %v, noisy oldest %v", s.NoisyTenants, s.QuietOldestAge, s.NoisyOldestAge)
	}
	if s.Lanes["live"] != 1009 || s.Lanes["backlog"] != 1 || s.FirstAttemptSum != 1500*time.Millisecond {
		t.Errorf("lanes %v, first-attempt sum %v", s.Lanes, s.FirstAttemptSum)
	}
	if LaneName(1, 4) != "retry-1" || LaneName(3, 4) != "backlog" || LaneName(0, 4) != "live" {
		t.Error("lane names")
	}
}
