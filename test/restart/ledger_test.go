package restart

import (
	"github.com/sluicemq/sluice/test/ledger"
	"github.com/sluicemq/sluice/test/testkit"
)

// bodySize is the size of every message body.
const bodySize = 1024

// bodies are the test's message bodies: 1 KiB, tagged 'm'.
var bodies = testkit.Bodies{Size: bodySize, Tag: 'm'}

// newLedger is the tests' ledger, the strictest: a message's one send is
// never retried, so a body has one MessageId; and what the tests check
// is what survives restarts (sends, deletes), not receive counts, nor a
// receive within an earlier one's visibility timeout (which one server
// should not make): a delete acknowledged within its receive's
// visibility timeout took, and a message that comes back after it is
// one that came back.
func newLedger() *ledger.Ledger { return ledger.New(ledger.Config{Bodies: bodies}) }

// pick chooses the messages a drain deletes, about half of those that must
// still be in the queue (live: their ids, in order), by id (about the
// order they were sent, and so were received): the oldest 3/8 all, which
// empties whole segments as a drain does, and two of every three of the
// next quarter, which leaves segments behind the drain's front with a few
// live messages among more deleted ones. Those are where a store that
// miscounts the bodies it keeps frees a segment too early, whatever the
// segment size. It returns the picked ids (indexed by id) and how many
// there are.
func pick(live []int) ([]bool, int) {
	if len(live) == 0 {
		return nil, 0
	}
	picked := make([]bool, live[len(live)-1]+1)
	n := 0
	for rank, id := range live {
		if rank < len(live)*3/8 || (rank < len(live)*5/8 && rank%3 != 2) {
			picked[id] = true
			n++
		}
	}
	return picked, n
}
