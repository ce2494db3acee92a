package broker_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/store/disk/format"
	"github.com/sluicemq/sluice/internal/vfs"
	st "github.com/sluicemq/sluice/sluicetype"
)

// TestModel's damage: bits flipped at rest in the data directory, and
// reads damaged on the way. Damage is never silent: a check reports it, a
// start refuses it (unless it is where a start does not read), a salvage
// reports what it lost, and every difference between the broker and the
// model after the salvage is one its report accounts for.

// damage closes the broker, flips one bit of a segment or snapshot file
// (a byte chosen over all of their durable bytes), and starts again: a
// check, then a start (refused when the damage is where a start reads),
// then a salvage, whose report the model reconciles with.
func (s *sim) damage() {
	s.verify("before damage")
	s.closeBroker()
	file, off, mask := s.pickDamage()
	if file == "" {
		s.open()
		return
	}
	if err := s.mem.Flip("/data/"+file, off, mask); err != nil {
		s.fail("flip: %v", err)
	}
	s.note("damage: bit %#02x of %s at %d flipped", mask, file, off)
	s.fig.damaged++

	rep, err := broker.Verify(s.cfg)
	if err != nil {
		s.fail("check after damage to %s at %d: %v", file, off, err)
	}
	b, err := broker.Open(s.cfg)
	if rep.Damage == nil {
		// Only the log's last sync mark, which a start cuts as a torn
		// tail: nothing else was there to lose.
		if err != nil {
			s.fail("start after damage the check did not find (%s at %d): %v", file, off, err)
		}
		s.fig.harmless++
		s.b = b
		s.verify("after damage that cost nothing")
		return
	}
	hot := slices.ContainsFunc(rep.Damage.Damage, func(d st.DamageInfo) bool { return !d.BelowFloor })
	switch {
	case err == nil && hot:
		b.Close()
		s.fail("a start took damaged data without a word: %+v", rep.Damage.Damage)
	case err == nil:
		b.Close() // below the floor: found by the check and the salvage only
	case !errors.Is(err, broker.ErrDamaged) || !strings.Contains(err.Error(), rep.Damage.Damage[0].File):
		s.fail("a start refused damage with %v, want ErrDamaged naming %s", err, rep.Damage.Damage[0].File)
	default:
		s.fig.refused++
	}

	cfg := s.cfg
	cfg.Salvage = true
	sb, err := broker.Open(cfg)
	if err != nil {
		s.fail("salvage of %s at %d: %v", file, off, err)
	}
	s.b = sb
	sv := sb.Salvaged()
	if sv == nil || len(sv.Damage) != len(rep.Damage.Damage) {
		s.fail("the salvage reports %+v, the check found %+v", sv, rep.Damage.Damage)
	}
	s.fig.salvaged++
	s.fig.salvageLost += sv.Lost()
	s.reconcile(sv)

	s.closeBroker()
	if rep, err := broker.Verify(s.cfg); err != nil || !rep.Healthy() {
		s.fail("check after the salvage: %v %+v", err, rep)
	}
	s.open()
	s.verify("after a salvage")
}

// pickDamage picks a byte of the data directory's segment and snapshot
// files, and a bit of it: half the time every durable byte alike (most
// are message bodies), half the time every frame of the segments alike
// (receives, deletes, visibility changes, snapshots, the catalog), then
// a byte of it.
func (s *sim) pickDamage() (file string, off int64, mask byte) {
	if s.drng.IntN(2) == 0 {
		if file, off, ok := s.pickFrame(); ok {
			return file, off, 1 << s.drng.IntN(8)
		}
	}
	names, _ := s.mem.ReadDir("/data")
	var total int64
	sizes := map[string]int64{}
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") || strings.HasSuffix(n, ".snap") {
			sizes[n] = s.mem.SyncedSize("/data/" + n)
			total += sizes[n]
		}
	}
	if total == 0 {
		return "", 0, 0
	}
	at := s.drng.Int64N(total)
	for _, n := range slices.Sorted(maps.Keys(sizes)) {
		if at < sizes[n] {
			return n, at, 1 << s.drng.IntN(8)
		}
		at -= sizes[n]
	}
	panic("unreachable")
}

// damagedRead damages one read of the disk on its way (one bit of the
// next read, whatever reads it) while the queues are read: the store
// reads it again, and nothing differs.
func (s *sim) damagedRead() {
	s.note("a read is damaged on its way")
	s.fig.damagedReads++
	s.fault.Set(vfs.Faults{FlipReads: 1})
	s.verify("with a damaged read")
	s.fault.Set(vfs.Faults{})
}

// reconcile checks the queues against the model after a salvage: a
// queue (with its dead-letter queue) the report says lost nothing must
// match the model exactly; one that lost messages misses exactly as many
// of the model's (those whose id the report read among them), and holds
// a message the model does not have, or one unlike the model's, only if
// the report says it lost other records (a delete, a receive, a
// snapshot). The model then drops what is lost, and what is ambiguous
// goes from both (purged from the broker by its body's unique head).
func (s *sim) reconcile(sv *st.SalvageReport) {
	loss := map[string]st.QueueLoss{}
	for _, q := range sv.Queues {
		loss[q.Name] = q
	}
	for _, name := range sv.Restored {
		q := slices.IndexFunc(s.m.queues, func(mq *mQueue) bool { return mq.name == name })
		if q >= 0 && s.m.queues[q].deleted {
			// Its deletion was a catalog record the damage took: the
			// queue is back, and is deleted again, as its owner would
			// on reading the report.
			// The lost record reads as the catalog's, or (the bit in
			// its partition field) as another partition's, or not at all.
			if !slices.ContainsFunc(sv.Queues, func(l st.QueueLoss) bool { return l.Records+l.Unknown > 0 }) && sv.Unknown == 0 {
				s.fail("the salvage brought back deleted queue %s, and reports no record lost", name)
			}
			s.note("salvage: deleted queue %s is back (its deletion was lost): deleted again", name)
			if err := s.b.DeleteQueue(ctx, name); err != nil {
				s.fail("deleting queue %s again after a salvage brought it back: %v", name, err)
			}
			s.m.queues[q].deletedAt = s.clk.Now()
			s.fig.salvageUndeleted++
			continue
		}
		if q < 0 {
			s.fail("the salvage brought back queue %s, which the model does not have", name)
		}
		// Brought back on a partition of its own, it knows no receipt
		// handle of before.
		s.m.receipts = slices.DeleteFunc(s.m.receipts, func(r receipt) bool { return r.q == q })
	}
	done := map[int]bool{}
	for q, mq := range s.m.queues {
		if done[q] || mq.deleted {
			continue
		}
		group := []int{q}
		if mq.dlq >= 0 {
			group = append(group, mq.dlq)
		} else if src := s.source(q); src >= 0 {
			group = append(group, src)
		}
		for _, g := range group {
			done[g] = true
		}
		var lost, other, deletes int
		unknown := sv.Unknown // stretches of which nothing read: anyone's
		var ids []string
		for _, g := range group {
			l := loss[s.m.queues[g].name]
			lost += l.Messages + l.WithoutBody
			other += l.Records + l.Snapshots
			deletes += l.Deletes
			unknown += l.Unknown
			ids = append(ids, l.IDs...)
		}
		s.reconcileGroup(group, lost, other+unknown, deletes, ids, len(sv.Damage), unknown)
	}
	// A queue that lost records may have lost its settings with them:
	// they are set again as the model has them.
	for _, mq := range s.m.queues {
		if l, ok := loss[mq.name]; ok && l.Records+l.Snapshots > 0 && !mq.deleted {
			attrs := maps.Clone(mq.attrs)
			delete(attrs, "FifoQueue")
			if err := s.b.(*broker.Broker).SetQueueAttributes(ctx, mq.name, attrs); err != nil {
				s.fail("setting %s's attributes again after a salvage: %v", mq.name, err)
			}
		}
	}
}

// reconcileGroup reconciles one queue and its dead-letter queue (see
// reconcile).
func (s *sim) reconcileGroup(group []int, lost, other, deletes int, ids []string, flipped, unknown int) {
	type seen struct {
		q int
		p broker.PeekedMessage
	}
	found := map[string][]seen{}
	for _, q := range group {
		name := s.m.queues[q].name
		for after := ""; ; {
			ps, next, err := s.b.Peek(name, broker.PeekFilter{Max: 100, After: after})
			if err != nil {
				s.fail("peek %s after a salvage: %v", name, err)
			}
			for _, p := range ps {
				found[p.MessageID] = append(found[p.MessageID], seen{q, p})
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	now := s.now()
	var missing, ambiguous []*mMsg
	var extra []seen
	model := map[string]*mMsg{}
	for _, mm := range s.m.live() {
		if !slices.Contains(group, mm.q) {
			continue
		}
		model[mm.id] = mm
		f := found[mm.id]
		if len(f) == 0 {
			missing = append(missing, mm)
			continue
		}
		state := "visible"
		if mm.visibleAt > now && mm.received {
			state = "in_flight"
		} else if mm.visibleAt > now {
			state = "delayed"
		}
		if p := f[0].p; len(f) > 1 || f[0].q != mm.q || p.Body != mm.body || p.ReceiveCount != mm.count || p.State != state || p.RetryLevel != mm.level {
			ambiguous = append(ambiguous, mm)
		}
	}
	for id, f := range found {
		if model[id] == nil {
			extra = append(extra, f...)
		}
	}
	names := make([]string, len(group))
	for i, q := range group {
		names[i] = s.m.queues[q].name
	}
	switch {
	case unknown > 0:
		// Stretches of which nothing read: anyone's records may have
		// been there.
		if len(missing) < lost-deletes {
			s.fail("after a salvage %v miss %d of the model's messages; the salvage reports %d lost (%d deletes lost)", names, len(missing), lost, deletes)
		}
	case len(missing) > lost || len(missing) < lost-deletes:
		// A message whose delete the damage took comes back, or, its
		// body freed, is counted without one: the model deleted it.
		s.fail("after a salvage %v miss %d of the model's messages; the salvage reports %d lost (%d deletes lost)", names, len(missing), lost, deletes)
	case (len(ambiguous) > 0 || len(extra) > 0) && other == 0:
		s.fail("after a salvage %v hold %d messages unlike the model's and %d it does not have, and the salvage reports no record lost but messages", names, len(ambiguous), len(extra))
	}
	known := 0
	for _, mm := range missing {
		if slices.Contains(ids, mm.id) {
			known++
		}
	}
	// The ids are read from the damaged bytes: the flipped bit may be in
	// one of them.
	if unnamed := lost - len(ids); unknown == 0 && known < len(missing)-max(0, unnamed)-flipped {
		var miss []string
		for _, mm := range missing {
			miss = append(miss, mm.id+about(mm))
		}
		s.fail("after a salvage %v miss messages whose ids the salvage does not report: %d of %d named (%d lost, ids %v); missing:\n  %s", names, known, len(missing), lost, ids, strings.Join(miss, "\n  "))
	}
	for _, mm := range missing {
		s.event(mm, "lost to damage (salvage)")
		s.m.remove(mm)
	}
	purge := func(q int, body string) {
		parts := strings.SplitN(body, "/", 3) // a body begins with its unique "queue/n/"
		head := parts[0] + "/" + parts[1] + "/"
		if _, err := s.b.PurgeFiltered(ctx, s.m.queues[q].name, broker.PeekFilter{Contains: head}); err != nil {
			s.fail("purge %q from %s after a salvage: %v", head, s.m.queues[q].name, err)
		}
	}
	for _, mm := range ambiguous {
		for _, f := range found[mm.id] {
			purge(f.q, f.p.Body)
		}
		s.event(mm, "unlike the model after a salvage: purged")
		s.m.remove(mm)
	}
	for _, f := range extra {
		purge(f.q, f.p.Body)
	}
	s.fig.salvageAmbiguous += len(ambiguous) + len(extra)
	if len(missing)+len(ambiguous)+len(extra) > 0 {
		s.note("salvage: %v: %d lost, %d unlike the model, %d back (purged)", names, len(missing), len(ambiguous), len(extra))
	}
}

// damageReport is the run's damage figures for its report.
func (s *sim) damageReport() string {
	f := &s.fig
	return fmt.Sprintf("damage: %d bits flipped at rest (%d refused by a start, %d salvaged, %d cost nothing), %d messages lost and counted, %d ambiguous ones purged, %d deleted queues back (deleted again); %d reads damaged on their way",
		f.damaged, f.refused, f.salvaged, f.harmless, f.salvageLost, f.salvageAmbiguous, f.salvageUndeleted, f.damagedReads)
}

// pickFrame picks a frame of the segments, every one alike, and a byte
// of it.
func (s *sim) pickFrame() (file string, off int64, ok bool) {
	type frame struct {
		file     string
		off, len int64
	}
	var frames []frame
	eachFrame(s.mem, func(name string, o int64, flen int, _ []format.Record) {
		frames = append(frames, frame{name, o, int64(flen)})
	})
	if len(frames) == 0 {
		return "", 0, false
	}
	fr := frames[s.drng.IntN(len(frames))]
	return fr.file, fr.off + s.drng.Int64N(fr.len), true
}
