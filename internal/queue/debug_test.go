package queue

import "fmt"

// dump describes FIFO group state for test failure messages.
func (q *Queue) dump() string {
	s := ""
	for name, g := range q.groups {
		s += fmt.Sprintf("group %s inFlight=%d queued=%v:", name, g.inFlight, g.queued)
		for _, m := range g.msgs {
			s += fmt.Sprintf(" %d/%d", m.Seq, m.State)
		}
		s += "\n"
	}
	s += fmt.Sprintf("gready=%d\n", len(q.gready))
	return s
}
