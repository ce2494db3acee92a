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
	ctr.ObserveFirstAttempt(1500*time.Millisecond, false)
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

// A tenant in the backlog mode shows it, and the queue sums its old side;
// first attempts served from the old side are counted apart.
func TestFreshFirst(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ts := []sched.TenantStats{
		{Name: "big", Ready: 1000, Oldest: now.UnixMilli() - 600_000, Lanes: []int{10, 990},
			Engaged: now.UnixMilli() - 540_000, OldestOld: now.UnixMilli() - 600_000},
		{Name: "a", Ready: 5, Oldest: now.UnixMilli() - 3_000, Lanes: []int{5, 0}},
	}
	var ctr Counters
	ctr.ObserveFirstAttempt(200*time.Millisecond, false)
	ctr.ObserveFirstAttempt(9*time.Minute, true)
	s := Queue(State{Now: now, Name: "q", Counts: queue.Counts{Visible: 1005}, Tenants: ts, Order: "fresh first"}, &ctr)
	if s.FreshFirstTenants != 1 || !s.FreshFirstSince.Equal(now.Add(-9*time.Minute)) || s.OldMessages != 990 || s.OldOldestAge != 10*time.Minute || s.Order != "fresh first" {
		t.Errorf("fresh first %d since %v, old %d the oldest %v, order %q", s.FreshFirstTenants, s.FreshFirstSince, s.OldMessages, s.OldOldestAge, s.Order)
	}
	if s.Tenants[0].Name != "big" || !s.Tenants[0].FreshFirst || s.Tenants[1].FreshFirst {
		t.Errorf("tenants %+v", s.Tenants)
	}
	if s.FirstAttemptOldSum != 9*time.Minute || s.FirstAttemptSum != 9*time.Minute+200*time.Millisecond {
		t.Errorf("first attempts: old %v, all %v", s.FirstAttemptOldSum, s.FirstAttemptSum)
	}
	for _, c := range []struct {
		cfg  queue.Config
		want string
	}{{queue.Config{FIFO: true}, "oldest first"}, {queue.Config{FIFO: true, Sched: sched.Config{Adaptive: true}}, "fresh groups first"},
		{queue.Config{Sched: sched.Config{SidelineAge: 300_000}}, "sideline after 300s"},
		{queue.Config{Sched: sched.Config{Adaptive: true}}, "fresh first"}, {queue.Config{}, "oldest first"}} {
		if got := Order(c.cfg); got != c.want {
			t.Errorf("order of %+v: %q, want %q", c.cfg, got, c.want)
		}
	}
}
