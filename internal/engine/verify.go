package engine

import (
	"slices"
	"sort"

	"github.com/sluicemq/sluice/internal/store"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Verify rebuilds the queues of a store that no broker serves, as a start
// would, and reads back every live message's body, checking its record. It
// frees nothing, drops no orphan and writes nothing (opening the store may
// cut a torn tail, as a start does). The caller closes the store.
func Verify(cfg Config) (st.VerifyReport, error) {
	e := newEngine(cfg)
	r, err := e.replay(e.clock.Now())
	if err != nil {
		return st.VerifyReport{}, err
	}
	var out st.VerifyReport
	for _, p := range r.ids() {
		name, ok := r.live(p)
		if !ok {
			out.Orphans++
			if n, _, _ := r.parts[p].Verify(); !r.dropped[p] {
				out.OrphanMessages += n
			}
			continue
		}
		c := st.QueueCheck{Name: name}
		c.Messages, c.Unreadable, c.FirstError = r.parts[p].Verify()
		out.Queues = append(out.Queues, c)
	}
	for p, name := range r.names {
		if _, ok := r.parts[p]; !ok {
			// In the catalog, without a record of its own: its partition is gone.
			out.Queues = append(out.Queues, st.QueueCheck{Name: name, Missing: true, FirstError: "the queue's partition is missing"})
		}
	}
	sort.Slice(out.Queues, func(i, j int) bool { return out.Queues[i].Name < out.Queues[j].Name })
	if r.salvage != nil {
		rep := r.salvage.report(r, func(p store.PartitionID) string {
			if name, ok := r.live(p); ok {
				return name
			}
			return r.names[p]
		}).SalvageReport
		// A message whose body cannot be read is one a salvage (a start,
		// too) drops without a body.
		for _, q := range out.Queues {
			if q.Unreadable == 0 {
				continue
			}
			i := slices.IndexFunc(rep.Queues, func(l st.QueueLoss) bool { return l.Name == q.Name })
			if i < 0 {
				rep.Queues = append(rep.Queues, st.QueueLoss{Name: q.Name})
				i = len(rep.Queues) - 1
			}
			rep.Queues[i].WithoutBody += q.Unreadable
		}
		out.Damage = &rep
	}
	return out, nil
}
