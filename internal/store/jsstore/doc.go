// Package jsstore is the store seam (package store) on NATS JetStream: each
// partition's records in a replicated stream of its own, so that a Sluice
// cluster's nodes share them and a node that takes a partition over (its
// new owner) replays exactly what the former owner wrote, and fences it
// off.
//
// # Streams and messages
//
// Partition n of a store with prefix P is the stream P_P<n> (R3 in a
// cluster: Config.Replicas), on the subjects p.p.<n>.> (p: P in lower
// case): file storage, discard new, no limits, message deletes denied,
// purges allowed, atomic batches and direct gets allowed, a dedupe window
// (Config.Duplicates), messages of at most the connections' max payload.
// It is made by the partition's first append. Its subjects:
//
//	p.p.<n>.r   records of appends
//	p.p.<n>.s   snapshots
//	p.p.<n>.m   kept records copied forward by compaction ("moved")
//	p.p.<n>.d   the tombstone of a drop
//
// A message's payload is a frame (frame.go): records of the partition
// packed in order, each with its kind (record, kept record, snapshot
// record, moved record, tombstone) and the owner's position, and a CRC-32C.
// The records of one operation (an append, a snapshot, a round of moves)
// go into as few messages as they fit (Config.MaxMessage, headers
// included); a record larger than a message is split over consecutive
// messages. Appends of one message that are written in the same commit
// share a message while they fit (their frames joined: fewer stream
// messages, one write each on every server). The store's own records (moves, tombstones) take no position:
// positions are the owner's, 1, 2, 3 … per partition, not stream
// sequences. Every message carries the headers
//
//	Nats-Msg-Id                  <store id>.<commit>-<index in the commit>
//	Sluice-Last                  the partition's last position once written
//	Nats-Expected-Last-Sequence  the stream's tail (first message of a commit)
//	Sluice-Snap                  its index in its snapshot (snapshot messages)
//	Nats-Batch-Id, -Sequence, -Commit   (commits of more than one message)
//
// A hint (store.Hint) is where a record is: its first message's sequence
// (A high and B low 32 bits), its entry there (C) and how many messages
// it spans (D). Read fetches those (a cache of recent messages with kept
// records; else a direct get, which any replica answers and may be
// behind; else the leader's get), checks them and that the entry is the
// record asked for.
//
// # Writing: group commit, fencing, doubt
//
// Each partition has a writer goroutine while it has work: it takes
// everything queued, up to MaxBatch messages (the servers' atomic batch
// limit, 1,000), and writes it as one atomic batch (or one message),
// fenced: its first message expects the stream's tail as this store last
// saw it. Appends of a partition are durable in submission order;
// partitions write in parallel. An append or snapshot that needs more
// than MaxBatch messages is refused whole with store.ErrTooBig.
//
// An append whose prev is not the partition's last position (counting
// the appends queued before it) fails with store.ErrFenced at once. When
// the stream refuses the fence (wrong last sequence, 10071 or 10164) and
// its leader says another write follows the tail, another store took the
// partition over: the write fails with ErrFenced and so does every later
// write of the partition, until ReplayPartition (from 0) reads the
// stream's tail from its leader again and makes this store its writer
// from there. That is how an owner takes a partition over: the first
// append after the replay (the owner's epoch record) fences off whatever
// the former writer still has in flight.
//
// A write whose answer does not come (a timeout, a connection lost; the
// 4-9 s a stream needs to elect a leader when the leader's host dies) may
// be in the stream. So may a refused one: while a cut-off node rejoins,
// its server may still take itself for the leader of a stream that
// another server leads now, and both take a publish; the first answer
// wins, and the former leader's refusal of the fence can come before the
// leader has stored the write. The writer asks the stream's leader
// whether the message after the tail is the write's first, and while
// that cannot tell, sends the write again, with the same message ids (the
// stream stores it once; a batch whose ids it has seen is refused as a
// duplicate), for up to RetryFor: it reports a failure or a fence only
// when the write is known not to be there. If that cannot be decided (or
// the store closes first), the write fails with ErrOutcomeUnknown, which
// also wraps store.ErrFenced: the store does not write the partition
// again until ReplayPartition has read what is there.
//
// # Space
//
// Replay starts at the newest snapshot: the last message on the snapshot
// subject, less its index. Another store may snapshot the partition and
// purge below the snapshot while one replays it (a former owner not yet
// fenced, the catalog's owner while other nodes read the catalog): a
// replay that finds its newest snapshot after the tail it read, or its
// messages purged under it, starts again, or fails if it handed entries
// over already; it never hands over a partition cut short.
//
// Snapshots are not rollups (a rollup would purge the kept bodies below
// it): instead each partition is purged (Purge up to a sequence) below
// its floor, the lowest of the newest snapshot's first message, the
// oldest message holding a kept record, and any message a bad release
// pinned. A snapshot's purge runs before its answer;
// releases are purged by a background janitor, at most once a
// PurgeInterval a partition. Nothing is purged before Recovered, nor in a
// partition another writer took over. Compact copies the kept records that
// hold a floor down (those below the newest snapshot) forward as moved
// records, tells the owner their new hints, releases the originals, and
// purges.
//
// # What it must not do
//
// It never closes the caller's connection, never writes a partition it
// was fenced from, and never deletes a message (the streams deny it):
// space is freed only by purges below the floor and by dropping a
// partition (a fenced tombstone, then the stream's deletion).
package jsstore
