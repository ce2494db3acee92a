package broker_test

import (
	"bytes"
	"cmp"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// The operations of TestModel (model_test.go): each calls the broker,
// checks what it answered against the model, and brings the model along.
// An operation that fails is a difference, unless writes were made to
// fail (sim.faulted): then it must have changed nothing.

// simOp is one kind of operation, with its weight (per mille) while the
// run mixes, fills queues up, or drains them.
type simOp struct {
	name string
	w    [3]int
	run  func(s *sim)
}

func (s *sim) ops() []simOp {
	var overlap [3]int
	if *modelOverlap {
		overlap = [3]int{5, 5, 5}
	}
	ops := []simOp{
		{"send", [3]int{200, 380, 40}, func(s *sim) { s.send(s.pickQueue(), 1, false) }},
		{"send-batch", [3]int{100, 250, 20}, func(s *sim) { s.send(s.pickQueue(), 2+s.rng.IntN(9), true) }},
		{"receive", [3]int{170, 80, 150}, func(s *sim) { s.receive(s.pickQueue(), 1+s.rng.IntN(10), s.visibility()) }},
		{"consume", [3]int{100, 30, 400}, (*sim).consume},
		{"delete", [3]int{100, 40, 100}, func(s *sim) { s.deleteHandles(1) }},
		{"delete-batch", [3]int{50, 20, 100}, func(s *sim) { s.deleteHandles(2 + s.rng.IntN(9)) }},
		{"visibility", [3]int{60, 30, 40}, (*sim).changeVisibility},
		{"retry", [3]int{40, 15, 40}, (*sim).retry},
		{"advance", [3]int{90, 90, 80}, (*sim).advance},
		{"purge", [3]int{4, 0, 6}, func(s *sim) { s.purge(s.pickQueue()) }},
		{"delete-queue", [3]int{3, 3, 3}, (*sim).recreate},
		{"redrive", [3]int{12, 5, 20}, func(s *sim) { s.redrive(false) }},
		{"move-task", [3]int{5, 2, 8}, func(s *sim) { s.redrive(true) }},
		{"snapshot", [3]int{15, 15, 15}, (*sim).snapshot},
		{"compact", [3]int{25, 25, 25}, (*sim).compact},
		{"restart", [3]int{8, 8, 8}, (*sim).restart},
		{"crash", [3]int{8, 8, 8}, (*sim).crash},
		{"crash-during", [3]int{6, 6, 6}, (*sim).crashDuring},
		{"snapshot-compact", overlap, (*sim).snapshotDuringCompaction},
		{"fault", [3]int{12, 12, 12}, (*sim).faultOp},
		{"verify", [3]int{5, 5, 5}, func(s *sim) { s.verify("at random") }},
	}
	if s.cl != nil {
		// A cluster's nodes restart and crash (each takes seconds);
		// power losses inside an operation and failing writes are the
		// single node's file system's.
		for i := range ops {
			switch ops[i].name {
			case "restart", "crash":
				ops[i].w = [3]int{3, 3, 3}
			case "crash-during", "fault", "snapshot-compact":
				ops[i].w = [3]int{}
			}
		}
	}
	return ops
}

// step runs one random operation.
func (s *sim) step() {
	s.fig.ops++
	// Damage comes from a random stream of its own, so that a seed runs
	// the operations it ran before damage was added until the first one.
	if s.cl == nil && *modelDamage {
		switch r := s.drng.IntN(1000); {
		case r < 4:
			s.damage()
			return
		case r < 9:
			s.damagedRead()
			return
		}
	}
	if s.rng.IntN(150) == 0 {
		s.phase = []int{0, 0, 1, 2}[s.rng.IntN(4)]
	}
	switch n := len(s.m.msgs); {
	case n > 1500:
		s.phase = 2
	case n < 50 && s.phase == 2:
		s.phase = 0
	}
	s.ladder()
	if s.op%100 == 0 {
		s.purgeOld()
	}
	ops := s.ops()
	total := 0
	for _, o := range ops {
		total += o.w[s.phase]
	}
	r := s.rng.IntN(total)
	for _, o := range ops {
		if r < o.w[s.phase] {
			o.run(s)
			return
		}
		r -= o.w[s.phase]
	}
}

// pickQueue picks a queue that exists, by the queues' weights.
func (s *sim) pickQueue() int {
	total := 0
	for _, q := range s.m.queues {
		if !q.deleted {
			total += q.weight
		}
	}
	r := s.rng.IntN(total)
	for i, q := range s.m.queues {
		if q.deleted {
			continue
		}
		if r < q.weight {
			return i
		}
		r -= q.weight
	}
	panic("unreachable")
}

// visibility is a receive's visibility timeout in seconds.
func (s *sim) visibility() int {
	switch r := s.rng.IntN(100); {
	case r < 10:
		return 0
	case r < 30:
		return 1 + s.rng.IntN(5)
	case r < 60:
		return 30
	case r < 90:
		return 60 + s.rng.IntN(240)
	default:
		return 3600
	}
}

// ---- sends ----

// bodySize is mostly small, sometimes large, now and then up to 256 KiB.
func (s *sim) bodySize() int {
	switch r := s.rng.IntN(100); {
	case r < 60:
		return 1 + s.rng.IntN(200)
	case r < 85:
		return 200 + s.rng.IntN(4<<10)
	case r < 96:
		return 8<<10 + s.rng.IntN(56<<10)
	default:
		return 128<<10 + s.rng.IntN(128<<10+1)
	}
}

// input makes a message of at most budget bytes of body.
func (s *sim) input(q int, budget int) st.SendInput {
	s.m.sends++
	head := fmt.Sprintf("%s/%d/", s.m.queues[q].name, s.m.sends)
	if s.rng.IntN(10) == 0 {
		head += "é日本🙂\t" // characters of more than one byte
	}
	size := min(s.bodySize(), budget)
	var b strings.Builder
	b.Grow(max(size, len(head)))
	b.WriteString(head)
	for off := s.rng.IntN(len(s.block)); b.Len() < size; off = 0 {
		b.WriteString(s.block[off:min(len(s.block), off+size-b.Len())])
	}
	in := st.SendInput{Body: b.String()}
	if n := s.rng.IntN(6) - 2; n > 0 {
		in.Attributes = map[string]st.AttributeValue{}
		for i := range n {
			name := fmt.Sprintf("a%d", i)
			switch s.rng.IntN(4) {
			case 0:
				in.Attributes[name] = st.AttributeValue{DataType: "String", StringValue: ptr(fmt.Sprintf("v%d-%s", s.m.sends, head))}
			case 1:
				in.Attributes[name] = st.AttributeValue{DataType: "Number", StringValue: ptr(strconv.Itoa(s.rng.IntN(1e6) - 5e5))}
			case 2:
				bin := make([]byte, 1+s.rng.IntN(32))
				for j := range bin {
					bin[j] = byte(s.rng.IntN(256))
				}
				in.Attributes[name] = st.AttributeValue{DataType: "Binary", BinaryValue: bin}
			default:
				in.Attributes[name] = st.AttributeValue{DataType: "String.custom", StringValue: ptr("x")}
			}
		}
	}
	if s.rng.IntN(5) == 0 {
		in.TraceHeader = fmt.Sprintf("Root=1-5759e988-%024d;Sampled=1", s.m.sends)
	}
	if s.m.queues[q].fifo {
		in.GroupID = fmt.Sprintf("g%d", s.rng.IntN(4))
		in.DedupID = fmt.Sprintf("d%d", s.m.sends)
	} else {
		if s.rng.IntN(3) == 0 {
			in.GroupID = fmt.Sprintf("t%d", s.rng.IntN(3)) // the tenant key
		}
		if s.rng.IntN(10) == 0 {
			in.DelaySeconds = ptr(1 + s.rng.IntN(60))
		}
	}
	return in
}

// send sends n messages to q, one by one or as a batch.
func (s *sim) send(q, n int, batch bool) {
	name := s.m.queues[q].name
	in := s.inputs(q, n)
	s.note("send %d to %s (batch %v, %d bytes)", n, name, batch, bodyBytes(in))
	var res []st.SendResult
	var errs []error
	if batch {
		var err error
		if res, errs, err = s.b.SendBatch(ctx, name, in); err != nil {
			s.fail("send batch to %s: %v", name, err)
		}
	} else {
		r, err := s.b.Send(ctx, name, in[0])
		res, errs = []st.SendResult{r}, []error{err}
	}
	s.sent(q, in, res, errs, 0)
}

// inputs makes n messages for q, at most 900 KiB together (a batch holds
// at most 1 MiB).
func (s *sim) inputs(q, n int) []st.SendInput {
	in := make([]st.SendInput, n)
	budget := 900 << 10
	for i := range in {
		in[i] = s.input(q, max(1, budget/(n-i)))
		budget -= len(in[i].Body) + 256
	}
	return in
}

func bodyBytes(in []st.SendInput) int {
	n := 0
	for i := range in {
		n += len(in[i].Body)
	}
	return n
}

// sent checks the answers to sends and adds the messages sent to the
// model. maybe, when not 0, names the operation: it was under way at a
// power loss, and its messages may be missing.
func (s *sim) sent(q int, in []st.SendInput, res []st.SendResult, errs []error, maybe int) {
	name := s.m.queues[q].name
	s.fig.sends++
	now := s.now()
	for i, err := range errs {
		if err != nil {
			if !s.faulted {
				s.fail("send to %s: %v", name, err)
			}
			s.fig.faultFailed++
			continue
		}
		r := res[i]
		if r.MessageID == "" || s.m.msgs[r.MessageID] != nil || s.m.gone[r.MessageID] {
			s.fail("send to %s answered message id %q, not a new one", name, r.MessageID)
		}
		if want := md5hex(in[i].Body); r.MD5OfBody != want {
			s.fail("send to %s: MD5OfBody %s, want %s", name, r.MD5OfBody, want)
		}
		mm := &mMsg{id: r.MessageID, q: q, body: in[i].Body, attrs: in[i].Attributes, trace: in[i].TraceHeader,
			group: in[i].GroupID, sent: now, maybe: maybe}
		if d := in[i].DelaySeconds; d != nil {
			mm.visibleAt = now + int64(*d)*1000
		}
		s.event(mm, "sent to %s, %d bytes, delayed %d ms", name, len(mm.body), max(0, mm.visibleAt-now))
		if maybe != 0 {
			s.event(mm, "the power went while it was being sent")
		}
		s.m.msgs[mm.id] = mm
		s.m.order = append(s.m.order, mm)
		s.fig.sent++
		s.fig.sentBytes += len(mm.body)
	}
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// ---- receives ----

// receive receives up to n messages of q and checks each against the
// model: a message it holds in q (or, for a dead-letter queue, one that
// may have moved there), never one in flight or delayed, its content
// intact, its receive count one more than before; on a FIFO queue, the
// head of its group. It returns their receipts.
func (s *sim) receive(q, n, vis int) []receipt {
	mq := s.m.queues[q]
	s.note("receive %d from %s, visibility %ds", n, mq.name, vis)
	s.fig.receives++
	s.ladder() // a receive first takes what failed since up the ladder
	now := s.now()
	ms, err := s.b.Receive(ctx, mq.name, st.ReceiveInput{MaxMessages: n, VisibilityTimeout: ptr(vis), WaitTimeSeconds: ptr(0)})
	if err != nil {
		if !s.faulted {
			s.fail("receive from %s: %v", mq.name, err)
		}
		s.fig.faultFailed++
		return nil
	}
	if len(ms) > n {
		s.fail("receive of at most %d from %s returned %d", n, mq.name, len(ms))
	}
	src := s.source(q)
	got := map[string]bool{}
	for _, msg := range ms {
		mm := s.m.msgs[msg.MessageID]
		switch {
		case got[msg.MessageID]:
			s.fail("one receive from %s returned message %s twice", mq.name, msg.MessageID)
		case mm == nil && s.m.gone[msg.MessageID]:
			s.fail("deleted message %s was delivered again from %s", msg.MessageID, mq.name)
		case mm == nil:
			s.fail("receive from %s returned message %s, which was never sent", mq.name, msg.MessageID)
		case mm.q == q:
			mm.moving = false
		case mm.moving && mm.q == src && src >= 0:
			s.deadLettered(mm, q) // by an earlier receive
			s.event(mm, "found dead-lettered (received from %s)", mq.name)
		default:
			s.fail("message %s received from %s, but it is in %s", msg.MessageID, mq.name, s.m.queues[mm.q].name)
		}
		got[msg.MessageID] = true
		if mm.visibleAt > now {
			s.fail("message %s of %s delivered %d ms before it is visible (received before: %v)%s", mm.id, mq.name, mm.visibleAt-now, mm.received, about(mm))
		}
		if mq.dlq >= 0 && mm.count >= mq.maxRecv {
			s.fail("message %s of %s delivered a %dth time: maxReceiveCount %d should have dead-lettered it%s", mm.id, mq.name, mm.count+1, mq.maxRecv, about(mm))
		}
		s.checkMessage(mm, msg)
	}
	disorder := ""
	if mq.fifo {
		disorder = s.groupOrder(q, ms, now)
	}
	var out []receipt
	for _, msg := range ms {
		mm := s.m.msgs[msg.MessageID]
		mm.count, mm.handle, mm.received = msg.ReceiveCount, msg.ReceiptHandle, true
		mm.visibleAt, mm.delivered = now+int64(vis)*1000, now
		if mq.ladder != nil {
			s.m.flying[mm.id] = mm
		}
		s.event(mm, "received from %s (count %d, level %d), visibility %ds", mq.name, mm.count, mm.level, vis)
		r := receipt{q: q, inc: mm.inc, id: mm.id, handle: msg.ReceiptHandle}
		s.m.addReceipt(r)
		out = append(out, r)
	}
	s.fig.received += len(ms)
	if disorder != "" {
		s.verifyQueues(disorder, q) // names a message lost at the head of its group
		s.fail("%s", disorder)
	}
	if mq.dlq >= 0 {
		// A receive sends a ready message that was received
		// maxReceiveCount times to the dead-letter queue instead of
		// delivering it: any such message it did not return may have gone.
		for _, mm := range s.m.in(q) {
			if !got[mm.id] && mm.visibleAt <= now && mm.count >= mq.maxRecv && !mm.moving {
				mm.moving = true
				s.event(mm, "may be dead-lettered by a receive from %s", mq.name)
			}
		}
	}
	return out
}

// checkMessage compares a received message with the model's.
func (s *sim) checkMessage(mm *mMsg, msg st.Message) {
	name := s.m.queues[mm.q].name
	switch {
	case msg.Body != mm.body:
		s.fail("message %s of %s: body of %d bytes differs from the %d bytes sent (%.40q)%s", mm.id, name, len(msg.Body), len(mm.body), msg.Body, about(mm))
	case msg.MD5OfBody != md5hex(mm.body):
		s.fail("message %s of %s: MD5OfBody %s, want %s%s", mm.id, name, msg.MD5OfBody, md5hex(mm.body), about(mm))
	case !sameAttributes(msg.Attributes, mm.attrs):
		s.fail("message %s of %s: attributes %v, sent %v%s", mm.id, name, msg.Attributes, mm.attrs, about(mm))
	case msg.TraceHeader != mm.trace:
		s.fail("message %s of %s: trace header %q, sent %q%s", mm.id, name, msg.TraceHeader, mm.trace, about(mm))
	case msg.SentTimestamp.UnixMilli() != mm.sent:
		s.fail("message %s of %s: sent at %d, was sent at %d%s", mm.id, name, msg.SentTimestamp.UnixMilli(), mm.sent, about(mm))
	case msg.ReceiveCount != mm.count+1:
		s.fail("message %s of %s: receive count %d, want %d%s", mm.id, name, msg.ReceiveCount, mm.count+1, about(mm))
	case msg.DeadLetterSourceArn != mm.dlqSource:
		s.fail("message %s of %s: dead-letter source %q, want %q%s", mm.id, name, msg.DeadLetterSourceArn, mm.dlqSource, about(mm))
	case s.m.queues[mm.q].fifo && msg.GroupID != mm.group:
		s.fail("message %s of %s: group %q, sent %q%s", mm.id, name, msg.GroupID, mm.group, about(mm))
	case msg.RetryLevel != mm.level:
		s.fail("message %s of %s: retry level %d, want %d%s", mm.id, name, msg.RetryLevel, mm.level, about(mm))
	case msg.Failures != mm.failures || msg.FailReason != mm.failReason || msg.LastError != mm.lastError:
		s.fail("message %s of %s: %d failures, the last %q (%q); want %d, %q (%q)%s", mm.id, name, msg.Failures, msg.FailReason, msg.LastError,
			mm.failures, mm.failReason, mm.lastError, about(mm))
	case mm.failures > 0 && mm.firstFail >= 0 && msg.FirstFailure.UnixMilli() != mm.firstFail:
		s.fail("message %s of %s: first failure at %d, want %d%s", mm.id, name, msg.FirstFailure.UnixMilli(), mm.firstFail, about(mm))
	}
}

// deadLettered makes mm, found in dead-letter queue d, a message of d:
// a receive from its source moved it there, over maxReceiveCount, at a
// time the model does not know.
func (s *sim) deadLettered(mm *mMsg, d int) {
	s.m.moveTo(mm, d)
	mm.dlqSource = s.m.queues[s.source(d)].arn
	s.m.failed(mm, -1, "MaxReceiveCount", "")
	s.fig.toDLQ++
}

func sameAttributes(a, b map[string]st.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || x.DataType != y.DataType || (x.StringValue == nil) != (y.StringValue == nil) ||
			x.StringValue != nil && *x.StringValue != *y.StringValue || !bytes.Equal(x.BinaryValue, y.BinaryValue) {
			return false
		}
	}
	return true
}

// groupOrder checks that a FIFO receive delivered from a group only when
// none of its messages was in flight, from its oldest message on, in
// order; it returns what went wrong, if anything.
func (s *sim) groupOrder(q int, ms []st.Message, now int64) string {
	var groups []string
	byGroup := map[string][]string{}
	for _, msg := range ms {
		g := s.m.msgs[msg.MessageID].group
		if byGroup[g] == nil {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], msg.MessageID)
	}
	for _, g := range groups {
		var want []string
		for _, mm := range s.m.in(q) {
			if mm.group != g {
				continue
			}
			if mm.visibleAt > now {
				return fmt.Sprintf("FIFO group %s delivered while its message %s is in flight", g, mm.id)
			}
			want = append(want, mm.id)
		}
		if got := byGroup[g]; len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			return fmt.Sprintf("FIFO group %s delivered %v, want the head of %v", g, got, want[:min(len(want), 12)])
		}
	}
	return ""
}

// consume receives up to 10 messages and deletes them, as a consumer does.
func (s *sim) consume() {
	q := s.pickQueue()
	rs := s.receive(q, 10, 60)
	if len(rs) > 0 {
		s.deleteBatch(q, rs, s.rng.IntN(4) == 0)
	}
}

// ---- deletes and visibility ----

// handles picks up to n receipts of one queue, some of them stale.
func (s *sim) handles(n int) (int, []receipt) {
	if len(s.m.receipts) == 0 {
		return -1, nil
	}
	s.ladder()
	q := s.m.receipts[s.rng.IntN(len(s.m.receipts))].q
	var rs []receipt
	seen := map[string]bool{}
	for range 3 * n {
		r := s.m.receipts[s.rng.IntN(len(s.m.receipts))]
		if r.q == q && !seen[r.handle] {
			seen[r.handle] = true
			rs = append(rs, r)
			if len(rs) == n {
				break
			}
		}
	}
	s.resolveFor(rs)
	return q, rs
}

// resolveFor finds out where the messages of the receipts that may have
// moved are.
func (s *sim) resolveFor(rs []receipt) {
	for _, r := range rs {
		if _, h := s.m.stateOf(r); h == hUnsure {
			s.resolve(r.q)
			return
		}
	}
}

func (s *sim) deleteHandles(n int) {
	q, rs := s.handles(n)
	if len(rs) > 0 {
		s.deleteBatch(q, rs, n == 1)
	}
}

// deleteBatch deletes by receipt handles: a message goes when its handle
// is its newest (and, on a FIFO queue, it is still in flight); an old
// handle deletes nothing (a FIFO queue says it expired).
func (s *sim) deleteBatch(q int, rs []receipt, single bool) {
	mq := s.m.queues[q]
	s.note("delete %d from %s", len(rs), mq.name)
	hs := handlesOf(rs)
	var errs []error
	if single && len(rs) == 1 {
		errs = []error{s.b.Delete(ctx, mq.name, hs[0])}
	} else {
		var err error
		if errs, err = s.b.DeleteBatch(ctx, mq.name, hs); err != nil {
			s.fail("delete batch from %s: %v", mq.name, err)
		}
	}
	s.deleted(q, rs, errs, 0)
}

func handlesOf(rs []receipt) []string {
	hs := make([]string, len(rs))
	for i, r := range rs {
		hs[i] = r.handle
	}
	return hs
}

// deleted checks the answers to deletes by the receipts and brings the
// model along. maybe, when not 0, names the operation: it was under way
// at a power loss, and what it deleted may be back.
func (s *sim) deleted(q int, rs []receipt, errs []error, maybe int) {
	mq := s.m.queues[q]
	s.ladder() // a delete first takes what failed since up the ladder
	now := s.now()
	s.fig.deletes++
	type state struct {
		mm *mMsg
		h  handleState
	}
	was := make([]state, len(rs)) // before any of the batch applies
	for i, r := range rs {
		was[i].mm, was[i].h = s.m.stateOf(r)
	}
	for i, r := range rs {
		mm, h := was[i].mm, was[i].h
		deletes := h == hCurrent && (!mq.fifo || mm.visibleAt > now)
		refused := mq.fifo && (h == hStale || h == hCurrent && !deletes)
		err := errs[i]
		switch {
		case deletes && err == nil && maybe != 0:
			mm.maybe = maybe
			s.event(mm, "deleted just before a power loss")
		case deletes && err == nil:
			s.m.remove(mm)
		case deletes && s.faulted:
			s.fig.faultFailed++
			s.event(mm, "delete failed (writes fail): %v", err)
		case deletes:
			s.fail("delete of message %s from %s with its newest handle: %v", r.id, mq.name, err)
		case refused && err == nil:
			s.fail("delete of FIFO message %s with an expired handle answered success", r.id)
		case !refused && err != nil:
			s.fail("delete of message %s from %s with an old handle (%d): %v, want success and no change", r.id, mq.name, h, err)
		}
	}
}

// changeVisibility changes the visibility of up to 3 received messages.
func (s *sim) changeVisibility() {
	q, rs := s.handles(1 + s.rng.IntN(3))
	if len(rs) == 0 {
		return
	}
	mq := s.m.queues[q]
	now := s.now()
	in := make([]broker.VisibilityChange, len(rs))
	for i, r := range rs {
		in[i] = broker.VisibilityChange{ReceiptHandle: r.handle, Seconds: []int{0, 0, 5, 30, 120, 900, 43200}[s.rng.IntN(7)]}
	}
	s.note("change visibility of %d in %s", len(rs), mq.name)
	s.fig.visChanges++
	s.ladder()
	errs, err := s.b.ChangeVisibilityBatch(ctx, mq.name, in)
	if err != nil {
		s.fail("change visibility in %s: %v", mq.name, err)
	}
	for i, r := range rs {
		mm, h := s.m.stateOf(r)
		inFlight := h == hCurrent && mm.received && mm.visibleAt > now
		at := now + int64(in[i].Seconds)*1000
		changes := inFlight && at-mm.delivered <= 12*3600*1000
		refused := h == hGone || h == hStale || h == hCurrent && !changes && (inFlight || mq.fifo)
		err := errs[i]
		switch {
		case changes && err == nil:
			mm.visibleAt = at // on a ladder, 0 s is a failure now (sim.ladder)
			s.event(mm, "visibility %ds", in[i].Seconds)
		case changes && s.faulted:
			s.fig.faultFailed++
			s.event(mm, "visibility %ds failed (writes fail): %v", in[i].Seconds, err)
		case changes:
			s.fail("visibility of message %s in %s to %ds: %v", r.id, mq.name, in[i].Seconds, err)
		case refused && err == nil:
			s.fail("visibility change of message %s in %s (handle %d, in flight %v, %ds) answered success", r.id, mq.name, h, inFlight, in[i].Seconds)
		case !refused && err != nil:
			s.fail("visibility change of message %s in %s (handle %d, no longer in flight): %v, want success and no change", r.id, mq.name, h, err)
		}
	}
}

// ---- retry ladders ----

// ladder makes the failures the broker makes on its own: a message
// received from a queue with a retry ladder whose visibility ran out
// failed when it ran out, and climbs (or leaves) from then. The broker
// does it lazily, at the queue's next call (every call to a queue first
// moves its timers on: a receive, a delete, a peek, the counts checked
// after every operation; maintenance on a clock advance), but its outcome
// does not depend on when: the delay counts from the failure. So the
// model applies it before it predicts anything of a queue at now.
func (s *sim) ladder() {
	now := s.now()
	var due []*mMsg
	for id, mm := range s.m.flying {
		switch {
		case s.m.msgs[id] != mm || !mm.received || s.m.queues[mm.q].ladder == nil:
			delete(s.m.flying, id) // gone, moved, or failed already
		case mm.visibleAt <= now:
			delete(s.m.flying, id)
			due = append(due, mm)
		}
	}
	// In the order they failed, so that a failure's report reads in order.
	slices.SortFunc(due, func(a, b *mMsg) int {
		return cmp.Or(cmp.Compare(a.visibleAt, b.visibleAt), strings.Compare(a.id, b.id))
	})
	for _, mm := range due {
		s.climb(mm, mm.visibleAt, "VisibilityTimeout", "", -1)
	}
}

// climb fails mm on its queue's ladder at at (ms): it waits its level's
// delay (delay ms instead when not negative) one level up, no longer in
// flight (its handle still names it: a delete takes it, a visibility
// change does nothing); a failure on the last level sends it to the
// queue's dead-letter queue (a new message there: level 0, its receive
// count and failures kept) or drops it.
func (s *sim) climb(mm *mMsg, at int64, reason, text string, delay int64) {
	mq := s.m.queues[mm.q]
	s.m.failed(mm, at, reason, text)
	mm.received = false
	if mm.level >= len(mq.ladder) {
		if mq.dlq < 0 {
			s.fig.dropped++
			s.event(mm, "off the ladder of %s (%s): dropped", mq.name, reason)
			s.m.remove(mm)
			return
		}
		s.m.moveTo(mm, mq.dlq)
		mm.dlqSource = mq.arn
		s.fig.exhausted++
		s.event(mm, "off the ladder of %s (%s): to %s", mq.name, reason, s.m.queues[mq.dlq].name)
		return
	}
	if delay < 0 {
		delay = mq.ladder[mm.level].Milliseconds()
	}
	mm.level++
	mm.visibleAt = at + delay
	s.fig.climbs++
	s.event(mm, "up the ladder of %s to level %d (%s at t+%d ms), visible %d ms after", mq.name, mm.level, reason, at-s.start(), delay)
}

// start is the clock's start (unix ms), for events' times.
func (s *sim) start() int64 { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() }

// retry gives a received message of a standard queue back with
// RetryMessage, sometimes with its own delay: mostly one in flight (of a
// queue with a ladder, when there is one), else any receipt held. A
// message in flight, with its newest handle, fails now (up its queue's
// ladder; without one, visible after the delay); an old handle, or a
// message gone, is refused as ReceiptHandleIsInvalid, one no longer in
// flight as MessageNotInflight, and nothing changes.
func (s *sim) retry() {
	if len(s.m.receipts) == 0 {
		return
	}
	s.ladder()
	now := s.now()
	var held, flying, laddered []receipt
	for _, r := range s.m.receipts {
		mq := s.m.queues[r.q]
		if mq.fifo {
			continue
		}
		held = append(held, r)
		if mm, h := s.m.stateOf(r); h == hCurrent && mm.received && mm.visibleAt > now {
			flying = append(flying, r)
			if mq.ladder != nil {
				laddered = append(laddered, r)
			}
		}
	}
	pick := held
	if s.rng.IntN(4) != 0 {
		for _, c := range [][]receipt{flying, laddered} {
			if len(c) > 0 {
				pick = c
			}
		}
	}
	if len(pick) == 0 {
		return
	}
	r := pick[s.rng.IntN(len(pick))]
	s.resolveFor([]receipt{r})
	mq := s.m.queues[r.q]
	var delay *int
	if s.rng.IntN(4) == 0 {
		delay = ptr(s.rng.IntN(11))
	}
	reason := ""
	if s.rng.IntN(2) == 0 {
		reason = fmt.Sprintf("op %d failed", s.op)
	}
	mm, h := s.m.stateOf(r)
	inFlight := h == hCurrent && mm.received && mm.visibleAt > now
	s.note("retry message %s of %s (delay %v, in flight %v, handle %d)", r.id, mq.name, deref(delay), inFlight, h)
	err := s.b.RetryMessage(ctx, mq.name, r.handle, delay, reason)
	switch {
	case inFlight && err == nil:
		s.fig.retried++
		d := int64(-1)
		if delay != nil {
			d = int64(*delay) * 1000
		}
		if mq.ladder != nil {
			s.climb(mm, now, "Retry", reason, d)
			break
		}
		s.m.failed(mm, now, "Retry", reason)
		mm.received, mm.visibleAt = false, now+max(d, 0)
		s.event(mm, "given back (RetryMessage), visible in %d ms", max(d, 0))
	case inFlight && s.faulted:
		s.fig.faultFailed++
		s.event(mm, "RetryMessage failed (writes fail): %v", err)
	case inFlight:
		s.fail("RetryMessage of message %s in %s, in flight with its newest handle: %v%s", r.id, mq.name, err, about(mm))
	case h == hCurrent && code(err) == st.CodeMessageNotInflight,
		h != hCurrent && code(err) == st.CodeReceiptHandleIsInvalid:
		s.fig.retryRefused++
	case h == hCurrent:
		s.fail("RetryMessage of message %s in %s, not in flight: %v, want MessageNotInflight%s", r.id, mq.name, err, about(mm))
	default:
		s.fail("RetryMessage of message %s in %s with a handle that names it no more (%d): %v, want ReceiptHandleIsInvalid", r.id, mq.name, h, err)
	}
}

func deref(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}

// ---- purges and redrives ----

// purge purges q: every message in it goes, unless q was purged less than
// 60 seconds ago.
func (s *sim) purge(q int) {
	s.resolve(q)
	mq := s.m.queues[q]
	s.note("purge %s", mq.name)
	s.fig.purges++
	now := s.clk.Now()
	refused := !mq.lastPurge.IsZero() && now.Sub(mq.lastPurge) < time.Minute
	err := s.b.Purge(ctx, mq.name)
	switch {
	case refused && code(err) == st.CodePurgeQueueInProgress:
		s.fig.purgeRefused++
	case refused:
		s.fail("purge of %s %s after the last: %v, want PurgeQueueInProgress", mq.name, now.Sub(mq.lastPurge), err)
	case err == nil:
		for _, mm := range s.m.in(q) {
			s.m.remove(mm)
		}
		mq.lastPurge = now
	case s.faulted:
		s.fig.faultFailed++
	default:
		s.fail("purge of %s: %v", mq.name, err)
	}
}

// recreate deletes the queue that comes and goes, or creates it again:
// refused within 60 seconds of its deletion (since the broker opened).
func (s *sim) recreate() {
	q := slices.IndexFunc(s.m.queues, func(q *mQueue) bool { return q.name == "epsilon" })
	mq := s.m.queues[q]
	now := s.clk.Now()
	if !mq.deleted {
		s.note("delete queue %s", mq.name)
		if err := s.b.DeleteQueue(ctx, mq.name); err != nil {
			if !s.faulted {
				s.fail("delete queue %s: %v", mq.name, err)
			}
			s.fig.faultFailed++
			return
		}
		s.dropQueue(q)
		mq.deletedAt = now
		return
	}
	s.note("create queue %s again", mq.name)
	refused := !mq.deletedAt.IsZero() && now.Sub(mq.deletedAt) < time.Minute
	_, err := s.b.CreateQueue(ctx, mq.name, mq.attrs, nil)
	switch {
	case refused && code(err) == st.CodeQueueDeletedRecently:
	case refused:
		s.fail("create queue %s %s after its deletion: %v, want QueueDeletedRecently", mq.name, now.Sub(mq.deletedAt), err)
	case err == nil:
		mq.deleted, mq.lastPurge = false, time.Time{}
	case s.faulted:
		s.fig.faultFailed++
	default:
		s.fail("create queue %s again: %v", mq.name, err)
	}
}

// dropQueue takes a deleted queue and its messages out of the model.
func (s *sim) dropQueue(q int) {
	for _, mm := range s.m.in(q) {
		s.m.remove(mm)
	}
	s.m.receipts = slices.DeleteFunc(s.m.receipts, func(r receipt) bool { return r.q == q })
	s.m.queues[q].deleted = true
}

// purgeOld deletes, by their send time, messages about to reach the 14
// days of retention, which the model does not follow.
func (s *sim) purgeOld() {
	until := s.clk.Now().Add(-modelOldest)
	for q, mq := range s.m.queues {
		var old []*mMsg
		for _, mm := range s.m.in(q) {
			if mm.sent < until.UnixMilli() {
				old = append(old, mm)
			}
		}
		if len(old) == 0 {
			continue
		}
		s.resolve(q)
		old = old[:0]
		for _, mm := range s.m.in(q) {
			if mm.sent < until.UnixMilli() {
				old = append(old, mm)
			}
		}
		s.note("purge %s before %s", mq.name, until)
		n, err := s.b.PurgeFiltered(ctx, mq.name, broker.PeekFilter{Until: until})
		if err != nil || n != len(old) {
			s.fail("purge of %s before %s: %d, %v; want %d", mq.name, until, n, err, len(old))
		}
		for _, mm := range old {
			s.m.remove(mm)
		}
	}
}

// redrive moves the ready messages of the dead-letter queue back to their
// source, at once or by a message move task.
func (s *sim) redrive(task bool) {
	var dlqs []int
	for _, mq := range s.m.queues {
		if mq.dlq >= 0 {
			dlqs = append(dlqs, mq.dlq)
		}
	}
	d := dlqs[s.rng.IntN(len(dlqs))]
	s.resolve(d)
	dq := s.m.queues[d]
	now := s.now()
	var want []*mMsg
	for _, mm := range s.m.in(d) {
		if mm.visibleAt <= now && mm.dlqSource == "" {
			// A move task fails on a message sent to the dead-letter
			// queue directly (it has no source to go back to);
			// RedriveFiltered passes over it.
			task = false
		}
		if mm.visibleAt <= now && mm.dlqSource != "" {
			want = append(want, mm)
		}
	}
	s.note("redrive %d from %s (task %v)", len(want), dq.name, task)
	s.fig.redrives++
	var n int
	var err error
	if task {
		var h string
		if h, err = s.b.StartMoveTask(ctx, dq.arn, "", 0); err == nil {
			var mt broker.MoveTask
			mt, err = s.b.WaitMoveTask(ctx, h)
			n = int(mt.ApproximateNumberOfMessagesMoved)
			if err == nil && mt.Status != "COMPLETED" {
				err = fmt.Errorf("move task %s: %s", mt.Status, mt.FailureReason)
			}
		}
	} else {
		n, err = s.b.RedriveFiltered(ctx, dq.name, broker.PeekFilter{}, "")
	}
	if err != nil && s.faulted && n == 0 {
		s.fig.faultFailed++
		return
	}
	if err != nil || n != len(want) {
		s.fail("redrive from %s: %d moved, %v; want %d", dq.name, n, err, len(want))
	}
	for _, mm := range want {
		src := slices.IndexFunc(s.m.queues, func(q *mQueue) bool { return q.arn == mm.dlqSource })
		s.m.moveTo(mm, src)
		mm.count, mm.dlqSource = 0, ""
		if !task {
			// RedriveFiltered forgets its failures; a move task keeps
			// them (both start it at the ladder's bottom).
			mm.failures, mm.failReason, mm.lastError, mm.firstFail = 0, "", "", 0
		}
		s.event(mm, "redriven to %s (task %v)", s.m.queues[src].name, task)
	}
	s.fig.redriven += len(want)
}

// ---- time, storage and faults ----

func (s *sim) advance() {
	var d time.Duration
	switch r := s.rng.IntN(100); {
	case r < 35:
		d = time.Duration(1+s.rng.IntN(1000)) * time.Millisecond
	case r < 65:
		d = time.Duration(1+s.rng.IntN(10)) * time.Second
	case r < 90:
		d = time.Duration(10+s.rng.IntN(50)) * time.Second
	case r < 98:
		d = time.Duration(1+s.rng.IntN(10)) * time.Minute
	default:
		d = time.Hour
	}
	s.note("advance %s", d)
	s.fig.advances++
	s.clk.Advance(d) // runs the broker's timers (maintenance, compaction) at once
}

func (s *sim) snapshot() {
	s.note("snapshot")
	s.fig.snapshots++
	if err := s.b.Snapshot(ctx); err != nil {
		s.fail("snapshot: %v", err)
	}
}

// compact runs a compaction round (and whatever else is due).
func (s *sim) compact() {
	s.note("compaction round")
	s.fig.compactions++
	s.clk.Advance(modelCompact)
}

// faultOp runs one operation while every write fails (no space, or a
// failed fsync): it may fail, and then must have changed nothing. Or
// time passes meanwhile: what the broker writes on its own then (the
// retry ladders' climbs, moves off them, snapshots, compaction) fails.
func (s *sim) faultOp() {
	f := []vfs.Faults{{NoSpace: true}, {SyncError: true}}[s.rng.IntN(2)]
	s.note("writes fail: %+v", f)
	s.fig.faults++
	s.fault.Set(f)
	s.faulted = true
	switch s.rng.IntN(11) {
	case 0:
		s.send(s.pickQueue(), 1, false)
	case 1:
		s.send(s.pickQueue(), 1+s.rng.IntN(10), true)
	case 2:
		s.receive(s.pickQueue(), 1+s.rng.IntN(10), s.visibility())
	case 3:
		s.consume()
	case 4:
		s.deleteHandles(1 + s.rng.IntN(10))
	case 5:
		s.changeVisibility()
	case 6:
		s.purge(s.pickQueue())
	case 7:
		s.recreate()
	case 8:
		s.retry()
	case 9:
		// Time passes: maintenance, on a disk that fails, takes
		// messages up the ladders and off them, snapshots and compacts.
		// What it wrote on its own meets the failing disk: a queue's
		// snapshot waits for it (the disk's writer could otherwise
		// take it once writes work again, and a seed would not replay).
		s.advance()
		if b, ok := s.b.(*broker.Broker); ok {
			for _, mq := range s.m.queues {
				if !mq.deleted {
					_ = broker.SnapshotQueue(b, mq.name) // fails, and changes nothing
				}
			}
		}
	default:
		s.redrive(false)
	}
	s.faulted = false
	s.fault.Set(vfs.Faults{})
}

// crashDuring loses power while an operation is under way: a batch of
// sends, a batch of deletes, the deletion of a queue, a compaction round
// (with the maintenance due), a snapshot. An operation not answered before
// the power went may or may not have happened, but wholly: a batch is one
// write, a queue goes by its catalog record; compaction and snapshots
// change no message.
func (s *sim) crashDuring() {
	s.verify("before a power loss")
	switch s.rng.IntN(5) {
	case 0:
		q := s.pickQueue()
		name := s.m.queues[q].name
		in := s.inputs(q, 1+s.rng.IntN(10))
		s.note("power loss during a send of %d to %s", len(in), name)
		var res []st.SendResult
		var errs []error
		var err error
		s.lose(func() { res, errs, err = s.b.SendBatch(ctx, name, in) })
		if err != nil {
			s.fail("send batch to %s: %v", name, err)
		}
		s.m.maybes++
		s.sent(q, in, res, errs, s.m.maybes)
	case 1:
		q, rs := s.handles(1 + s.rng.IntN(10))
		if len(rs) == 0 {
			s.note("power loss")
			s.lose(nil)
			break
		}
		name := s.m.queues[q].name
		s.note("power loss during a delete of %d from %s", len(rs), name)
		var errs []error
		var err error
		s.lose(func() { errs, err = s.b.DeleteBatch(ctx, name, handlesOf(rs)) })
		if err != nil {
			s.fail("delete batch from %s: %v", name, err)
		}
		s.m.maybes++
		s.deleted(q, rs, errs, s.m.maybes)
	case 2:
		q := slices.IndexFunc(s.m.queues, func(q *mQueue) bool { return q.name == "epsilon" })
		mq := s.m.queues[q]
		if mq.deleted {
			s.note("power loss")
			s.lose(nil)
			break
		}
		s.note("power loss during the deletion of queue %s", mq.name)
		var err error
		s.lose(func() { err = s.b.DeleteQueue(ctx, mq.name) })
		if err != nil {
			s.fail("delete queue %s: %v", mq.name, err)
		}
		_, err = s.b.GetQueue(mq.name)
		switch code(err) {
		case "":
			s.fig.inflightLost++
		case st.CodeQueueDoesNotExist:
			s.fig.inflightKept++
			s.dropQueue(q)
			mq.deletedAt = s.clk.Now() // by a broker that is gone, in its catalog
		default:
			s.fail("queue %s after a power loss during its deletion: %v", mq.name, err)
		}
	case 3:
		s.note("power loss during a compaction round")
		s.fig.compactions++
		s.lose(func() { s.clk.Advance(modelCompact) })
	default:
		s.note("power loss during a snapshot")
		s.fig.snapshots++
		var err error
		s.lose(func() { err = s.b.Snapshot(ctx) })
		if err != nil {
			s.fail("snapshot: %v", err)
		}
	}
	s.verify("after a power loss")
}

// snapshotDuringCompaction renews every snapshot while a compaction round
// moves bodies (-model.overlap).
func (s *sim) snapshotDuringCompaction() {
	s.note("snapshot during a compaction round")
	s.fig.snapshots++
	s.fig.compactions++
	done := make(chan error, 1)
	go func(b modelBroker) { done <- b.Snapshot(ctx) }(s.b)
	s.clk.Advance(modelCompact)
	if err := <-done; err != nil {
		s.fail("snapshot: %v", err)
	}
}

// ---- verification ----

// checkCounts compares the queues' approximate counts with the model
// after every operation (a dead-letter queue summed with its source,
// since the model may not know yet which of the two a message is in). A
// message lost in between shows here at once; verifyQueues names it.
func (s *sim) checkCounts() {
	s.ladder()
	model := make([]int, len(s.m.queues))
	for _, mm := range s.m.live() {
		model[mm.q]++
	}
	for q, mq := range s.m.queues {
		if s.source(q) >= 0 || mq.deleted {
			continue // counted with its source, or gone
		}
		qs := []int{q}
		if mq.dlq >= 0 {
			qs = append(qs, mq.dlq)
		}
		n, want := 0, 0
		for _, q := range qs {
			n += s.count(q)
			want += model[q]
		}
		if n != want {
			s.verifyQueues(fmt.Sprintf("%s counts %d messages, the model %d", mq.name, n, want), qs...)
			s.fail("%s counts %d messages, the model %d", mq.name, n, want)
		}
	}
}

// count is the sum of q's approximate numbers of messages.
func (s *sim) count(q int) int {
	name := s.m.queues[q].name
	a, err := s.b.GetQueueAttributes(name, []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"})
	if err != nil {
		s.fail("attributes of %s: %v", name, err)
	}
	n := 0
	for _, v := range a {
		c, err := strconv.Atoi(v)
		if err != nil {
			s.fail("attributes of %s: %v", name, a)
		}
		n += c
	}
	return n
}

// resolve verifies q and the queue it is a dead-letter queue of (or its
// own), which tells where every message that may have been dead-lettered
// is.
func (s *sim) resolve(q int) {
	if d := s.m.queues[q].dlq; d >= 0 {
		s.verifyQueues("to resolve moves", q, d)
	} else if src := s.source(q); src >= 0 {
		s.verifyQueues("to resolve moves", src, q)
	}
}

// verify checks every queue against the model.
func (s *sim) verify(why string) {
	// Dead-letter queues last: a look at a queue with a ladder takes
	// what failed since off it, to its dead-letter queue.
	var all []int
	for i := range s.m.queues {
		if s.source(i) < 0 {
			all = append(all, i)
		}
	}
	for i := range s.m.queues {
		if s.source(i) >= 0 {
			all = append(all, i)
		}
	}
	s.verifyQueues(why, all...)
}

// verifyQueues peeks at every message of the queues (which does not
// change them) and compares them with the model: every message the model
// holds is there, once, with its body, receive count and state, and
// nothing else is; the queues' approximate counts agree. A dead-letter
// queue is verified with its source.
func (s *sim) verifyQueues(why string, qs ...int) {
	s.fig.verifies++
	s.ladder()
	now := s.now()
	type seen struct {
		q int
		p broker.PeekedMessage
	}
	found := map[string]seen{}
	var diffs []string
	for _, q := range qs {
		name := s.m.queues[q].name
		if s.m.queues[q].deleted {
			if _, err := s.b.GetQueue(name); code(err) != st.CodeQueueDoesNotExist {
				diffs = append(diffs, fmt.Sprintf("deleted queue %s: %v, want QueueDoesNotExist", name, err))
			}
			continue
		}
		for after := ""; ; {
			ps, next, err := s.b.Peek(name, broker.PeekFilter{Max: 100, After: after})
			if err != nil {
				s.fail("peek %s: %v", name, err)
			}
			for _, p := range ps {
				if f, dup := found[p.MessageID]; dup {
					diffs = append(diffs, fmt.Sprintf("message %s is in %s and in %s", p.MessageID, s.m.queues[f.q].name, name))
				}
				found[p.MessageID] = seen{q, p}
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	counts := map[int]int{}
	present := map[int]map[bool][]string{} // messages an operation under way at a power loss may have sent or deleted
	for _, mm := range s.m.live() {
		if !slices.Contains(qs, mm.q) {
			continue
		}
		f, ok := found[mm.id]
		delete(found, mm.id)
		s.fig.checked++
		if mm.maybe != 0 {
			if present[mm.maybe] == nil {
				present[mm.maybe] = map[bool][]string{}
			}
			present[mm.maybe][ok] = append(present[mm.maybe][ok], mm.id)
			if mm.maybe = 0; !ok {
				s.m.remove(mm)
				continue
			}
		}
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("message %s (%d bytes, sent %s ago) of %s is lost", mm.id, len(mm.body),
				time.Duration(now-mm.sent)*time.Millisecond, s.m.queues[mm.q].name)+about(mm))
			continue
		case f.q == mm.q:
			mm.moving = false
		case mm.moving && s.m.queues[mm.q].dlq == f.q:
			s.deadLettered(mm, f.q)
			s.event(mm, "found dead-lettered (peek)")
		default:
			diffs = append(diffs, fmt.Sprintf("message %s is in %s, the model has it in %s", mm.id, s.m.queues[f.q].name, s.m.queues[mm.q].name)+about(mm))
		}
		counts[f.q]++
		state := "visible"
		if mm.visibleAt > now && mm.received {
			state = "in_flight"
		} else if mm.visibleAt > now {
			state = "delayed"
		}
		p := f.p
		switch {
		case p.Body != mm.body:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: body of %d bytes differs from the %d bytes sent", mm.id, s.m.queues[mm.q].name, len(p.Body), len(mm.body))+about(mm))
		case p.ReceiveCount != mm.count:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: receive count %d, want %d", mm.id, s.m.queues[mm.q].name, p.ReceiveCount, mm.count)+about(mm))
		case p.State != state:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: %s, want %s", mm.id, s.m.queues[mm.q].name, p.State, state)+about(mm))
		case p.Sent.UnixMilli() != mm.sent:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: sent at %d, want %d", mm.id, s.m.queues[mm.q].name, p.Sent.UnixMilli(), mm.sent)+about(mm))
		case p.Source != mm.dlqSource:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: dead-letter source %q, want %q", mm.id, s.m.queues[mm.q].name, p.Source, mm.dlqSource)+about(mm))
		case p.RetryLevel != mm.level:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: retry level %d, want %d", mm.id, s.m.queues[mm.q].name, p.RetryLevel, mm.level)+about(mm))
		case p.Reason != mm.failReason || p.LastError != mm.lastError:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: last failure %q (%q), want %q (%q)", mm.id, s.m.queues[mm.q].name, p.Reason, p.LastError, mm.failReason, mm.lastError)+about(mm))
		case mm.failures > 0 && mm.firstFail >= 0 && p.FirstFailure.UnixMilli() != mm.firstFail:
			diffs = append(diffs, fmt.Sprintf("message %s of %s: first failure at %d, want %d", mm.id, s.m.queues[mm.q].name, p.FirstFailure.UnixMilli(), mm.firstFail)+about(mm))
		}
	}
	for _, op := range slices.Sorted(maps.Keys(present)) {
		if p := present[op]; len(p[true]) > 0 && len(p[false]) > 0 {
			diffs = append(diffs, fmt.Sprintf("one write under way at a power loss survived in part: messages %v are there, %v are not", p[true], p[false]))
		} else if len(p[true]) > 0 {
			s.fig.inflightSeen++
		} else {
			s.fig.inflightGone++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(found)) {
		what := "was never sent"
		if s.m.gone[id] {
			what = "was deleted: it came back"
		}
		diffs = append(diffs, fmt.Sprintf("message %s in %s %s", id, s.m.queues[found[id].q].name, what))
	}
	for _, q := range qs {
		if s.m.queues[q].deleted {
			continue
		}
		if n := s.count(q); n != counts[q] {
			diffs = append(diffs, fmt.Sprintf("queue %s counts %d messages, the model %d", s.m.queues[q].name, n, counts[q]))
		}
	}
	ss := s.b.StoreStats()
	if s.cl != nil && len(qs) == len(s.m.queues) {
		// A deleted queue's owner drops its partition once the catalog
		// tells it, after DeleteQueue returned.
		ss = s.cl.settledStats(int64(len(s.m.msgs)))
	}
	if ss.BadReleases != 0 || ss.Unreadable != 0 {
		diffs = append(diffs, fmt.Sprintf("store: %d bad releases, %d unreadable messages", ss.BadReleases, ss.Unreadable))
	}
	if len(qs) == len(s.m.queues) && ss.LiveMessages != int64(len(s.m.msgs)) {
		diffs = append(diffs, fmt.Sprintf("store keeps %d bodies for %d live messages", ss.LiveMessages, len(s.m.msgs)))
	}
	if len(diffs) > 0 {
		s.fail("%s: %d differences:\n  %s", why, len(diffs), strings.Join(diffs[:min(len(diffs), 12)], "\n  "))
	}
}
