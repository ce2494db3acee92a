// Package cluster decides which node of a cluster owns which store
// partition, and tells this node's engine (a Host) to take a partition up
// or to let it go.
//
// Ownership is a lease in a JetStream key-value bucket, "<cluster>-leases":
//
//	node.<name>  a member: held by each live node, renewed like a lease
//	part.<p>     the lease of partition p: held by its owner
//
// Both hold the holder's node name and a random instance id (JSON), so a
// restarted node is a new holder and a second node with the same name is
// noticed (Start waits for a crashed predecessor's membership to expire,
// and fails if it is renewed instead). Keys are created with a per-key TTL
// (the bucket has LimitMarkerTTL), renewed every TTL/3 by a publish fenced
// on the key's last revision that carries the TTL again (kv.Update would
// drop it) and a Msg-Id derived from that revision (so a retried renewal
// whose reply was lost comes back as a duplicate with the revision it
// made), and deleted with the revision as the precondition. A lease's term
// is the revision that created it. A watcher on the whole bucket gives
// each manager its view of the members and owners; the view only guides,
// the compare-and-set writes decide.
//
// A lease is liveness only. Two nodes can both believe they own a
// partition for a short while (a renewal stalled while the bucket elected
// a leader, and the key expired meanwhile); the store's fence (each append
// names the partition's expected last sequence, and a new owner writes an
// epoch record first) is what keeps the partition's log safe. The manager
// therefore keeps serving a partition whose renewals merely fail, and
// gives it up only when the bucket refuses a renewal because another node
// holds the key, or the engine reports that it was fenced off (Lost). A
// lease that expired while the bucket could take no renewal (its leader
// was lost, and the election outlasted the TTL) and that no other node
// took is created again by its holder, which serves on: had another node
// owned the partition in between, its epoch record fences the holder's
// next write. The other way round, a lease whose holder is silent
// (Config.Silent) and that the bucket still holds although it was last
// written longer than a lease lasts ago (the bucket's leader expires keys,
// and it may have been lost with the holder) is overdue: a node takes it
// over with a write fenced on its revision, as if it had expired.
//
// Placement: a partition's preferred order of nodes is the rendezvous
// (highest random weight) order of the live members. When a partition has
// no lease, the node ranked r in that order tries to create it after
// r × RankStep, so the preferred live node wins and the others stand in
// when it does not. A node hands a partition it has owned for Settle over
// to the partition's preferred node once that node has been a member for
// Settle, so a restarted node gets its share back. Close deletes this
// node's membership first and then its leases, so the others take its
// partitions at once; a crash leaves them to expire.
//
// The package must not write to partitions, nor read them: what owning a
// partition means (replay, epoch record, serving) is the Host's.
package cluster
