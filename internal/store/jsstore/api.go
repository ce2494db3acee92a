package jsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
)

// The JetStream API as the store uses it: raw requests, so that every
// answer (and the stream leader's, not a replica's, where it matters) is
// under the store's control. Error codes are nats-server's errors.json.
const (
	codeNotLeader          = 10009 // the cluster cannot handle the request (no leader)
	codeUnavailable        = 10008 // JetStream temporarily unavailable
	codeAccountResources   = 10002 // resource limits exceeded for account
	codeInsufficient       = 10023 // insufficient resources
	codeMemoryResources    = 10028
	codeMsgNotFound        = 10037
	codeStorageResources   = 10047 // insufficient storage resources available
	codeMsgTooBig          = 10054 // message size exceeds maximum allowed
	codeStreamNotFound     = 10059
	codeWrongLastSeq       = 10071 // wrong last sequence: N
	codeStoreFailed        = 10077 // stream store failed: …
	codeHeaderTooBig       = 10097
	codeStreamOffline      = 10118
	codeDupInProcess       = 10158 // duplicate message id is in process
	codeExpectNotReady     = 10163
	codeWrongLastSeqNoNum  = 10164 // wrong last sequence (a concurrent write)
	codeBatchIncomplete    = 10176
	codeStreamOfflineWhy   = 10194
	codeBatchTooLarge      = 10199
	codeBatchDuplicate     = 10201 // atomic batch contains a duplicate message id
	codeBatchTooManyFlight = 10210
)

// apiError is a JetStream API error answer.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("jetstream: %s (%d/%d)", e.Description, e.Code, e.ErrCode)
}

func errCode(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.ErrCode
	}
	return 0
}

// transient reports whether err may go away by itself (leadership moving,
// a reconnect): the request is worth repeating.
// codeNoPlacement is JetStream's "no suitable peers for placement": right
// after a cluster forms, or while a node restarts, the meta leader has not
// heard every peer yet (it passes within a moment).
const codeNoPlacement = 10005

func transient(err error) bool {
	switch errCode(err) {
	case codeNotLeader, codeUnavailable, codeStreamOffline, codeStreamOfflineWhy, codeDupInProcess,
		codeExpectNotReady, codeBatchIncomplete, codeBatchTooManyFlight, codeNoPlacement:
		return true
	case 0:
	default:
		return false
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrNoServers) ||
		errors.Is(err, nats.ErrStaleConnection)
}

// seamError maps a JetStream failure to the seam's sentinels.
func seamError(err error) error {
	switch errCode(err) {
	case codeMsgTooBig, codeBatchTooLarge, codeHeaderTooBig:
		return fmt.Errorf("%w: %v", store.ErrTooBig, err)
	case codeStorageResources, codeInsufficient, codeAccountResources, codeMemoryResources:
		return fmt.Errorf("%w: %v", store.ErrNoSpace, err)
	case codeStoreFailed:
		if d := strings.ToLower(err.Error()); strings.Contains(d, "space") || strings.Contains(d, "resources") {
			return fmt.Errorf("%w: %v", store.ErrNoSpace, err)
		}
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("%w: %v", store.ErrTooBig, err)
	}
	return fmt.Errorf("jsstore: write failed: %w", err)
}

const apiPrefix = "$JS.API."

// request sends one API request and decodes the answer into out (which
// must have an Error field promoted from apiResponse).
func (s *Store) request(ctx context.Context, subj string, req any, out interface{ apiErr() *apiError }) error {
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	defer cancel()
	// A read is asked again after hedgeEvery; a request that does work
	// (a purge, creating or deleting a stream: each a Raft proposal) after
	// a second, as a stalled one was before.
	every := time.Second
	if strings.HasPrefix(subj, "STREAM.INFO.") || strings.HasPrefix(subj, "STREAM.MSG.GET.") {
		every = hedgeEvery
	}
	msg, err := s.hedged(ctx, apiPrefix+subj, body, every)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("jsstore: answer to %s: %w", subj, err)
	}
	if e := out.apiErr(); e != nil {
		return e
	}
	return nil
}

// hedgeEvery is how long a read waits for an answer before it is sent
// again (the copies still out may answer too: the first answer wins).
const hedgeEvery = 250 * time.Millisecond

// hedged sends a request and returns the first answer, sending it again
// each time every passes without one, until ctx ends. A request that went
// to a leader stepping down (a graceful stop hands leadership over in
// milliseconds), or to a stream without a leader (its leader's server
// died or went silent: the others elect one 4-9 s later), is answered by
// the new leader within every of its election, and one that is slow
// to answer is not given up (its answer is still taken). NATS answers a
// request nobody listens to at once (no responders): it is sent again
// after 50 ms. Every API request the store makes is safe to repeat
// (reads, purges to a sequence, creating or deleting a stream).
func (s *Store) hedged(ctx context.Context, subj string, body []byte, every time.Duration) (*nats.Msg, error) {
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	out := &nats.Msg{Subject: subj, Reply: inbox, Data: body}
	if err := s.nc.PublishMsg(out); err != nil {
		return nil, err
	}
	next := time.Now().Add(every)
	nobody := false // the last answer was no responders
	for {
		wait, stop := context.WithDeadline(ctx, next)
		msg, err := sub.NextMsgWithContext(wait)
		stop()
		switch {
		case err == nil && msg.Header.Get("Status") == "503" && len(msg.Data) == 0:
			// No responders: nobody listens now (a stream electing its
			// leader); asked again shortly.
			nobody = true
			next = time.Now().Add(50 * time.Millisecond)
			if !clock.Sleep(ctx, clock.Real{}, 50*time.Millisecond) {
				return nil, nats.ErrNoResponders
			}
		case err == nil:
			return msg, nil
		case ctx.Err() != nil && nobody:
			return nil, nats.ErrNoResponders
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
		if !time.Now().Before(next) {
			if err := s.nc.PublishMsg(out); err != nil {
				return nil, err
			}
			next = time.Now().Add(every)
		}
	}
}

type apiResponse struct {
	Error *apiError `json:"error,omitempty"`
}

func (r *apiResponse) apiErr() *apiError { return r.Error }

type streamState struct {
	Msgs     uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

type streamInfo struct {
	apiResponse
	State   streamState `json:"state"`
	Cluster *struct {
		Leader string `json:"leader"`
	} `json:"cluster,omitempty"`
}

// Leader names the server that leads partition p's stream now ("" when
// it has none, or a single server holds it), for operators and failure
// tests.
func (s *Store) Leader(ctx context.Context, p store.PartitionID) (string, error) {
	return s.streamLeader(ctx, s.streamName(p))
}

func (s *Store) streamLeader(ctx context.Context, stream string) (string, error) {
	var r streamInfo
	if err := s.request(ctx, "STREAM.INFO."+stream, nil, &r); err != nil {
		return "", err
	}
	if r.Cluster == nil {
		return "", nil
	}
	return r.Cluster.Leader, nil
}

// info is the stream's state as its leader has it; ok false: no stream.
func (s *Store) info(ctx context.Context, stream string) (st streamState, ok bool, err error) {
	var r streamInfo
	err = s.request(ctx, "STREAM.INFO."+stream, nil, &r)
	if errCode(err) == codeStreamNotFound {
		return st, false, nil
	}
	return r.State, err == nil, err
}

type storedMsg struct {
	Subject  string `json:"subject"`
	Sequence uint64 `json:"seq"`
	Header   []byte `json:"hdrs,omitempty"`
	Data     []byte `json:"data,omitempty"`
}

type msgGetResponse struct {
	apiResponse
	Message *storedMsg `json:"message,omitempty"`
}

type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	MaxB    int    `json:"max_bytes,omitempty"`
}

// msg is a stream message as the store reads it.
type msg struct {
	subj string
	seq  uint64
	hdr  nats.Header
	data []byte
}

var errNoMsg = errors.New("no such message")

// leaderGet reads a message from the stream's leader (never stale):
// errNoMsg when there is none; store.ErrNotFound (wrapped) when the
// stream is gone.
func (s *Store) leaderGet(ctx context.Context, stream string, req msgGetRequest) (msg, error) {
	var r msgGetResponse
	err := s.request(ctx, "STREAM.MSG.GET."+stream, req, &r)
	switch errCode(err) {
	case 0:
	case codeMsgNotFound:
		return msg{}, errNoMsg
	case codeStreamNotFound:
		return msg{}, fmt.Errorf("%w: stream %s", store.ErrNotFound, stream)
	}
	if err != nil {
		return msg{}, err
	}
	if r.Message == nil {
		return msg{}, errors.New("jsstore: empty message get answer")
	}
	m := msg{subj: r.Message.Subject, seq: r.Message.Sequence, data: r.Message.Data}
	if len(r.Message.Header) > 0 {
		if m.hdr, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return msg{}, fmt.Errorf("jsstore: headers of %s message %d: %w", stream, m.seq, err)
		}
	}
	return m, nil
}

// directGet reads up to n messages from seq on, answered by any replica
// that is current (it may be behind the leader: the caller checks what
// it got). It returns the messages in order; none when the replica has
// nothing from seq on.
func (s *Store) directGet(ctx context.Context, stream string, seq uint64, n, maxBytes int) ([]msg, error) {
	req := msgGetRequest{Seq: seq}
	if n > 1 {
		req.Batch, req.MaxB = n, maxBytes
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	defer cancel()
	// Attempts within AckTimeout, a quarter second the first three, then
	// doubling up to a second: the replicas answer direct gets as a queue
	// group, and the member NATS picks may be a server that went silent
	// (its machine or network died, and its routes are not closed yet);
	// asked again, NATS picks again. Three short attempts first, because
	// a takeover's replay makes several reads and each may meet the silent
	// replica (a third of them with three replicas): with doubling from the
	// first, one read in 27 waited 1.75 s, and of a lost node's 100
	// takeovers some met several such reads. A replica slow to answer under
	// load gets the longer attempts. (Not hedged as request's: a batch's
	// answers from two replicas would mix.)
	wait := hedgeEvery
	for i := 1; ; i++ {
		if i > shortDirectGets {
			wait = min(2*wait, time.Second)
		}
		attempt, stop := context.WithTimeout(ctx, wait)
		out, err := s.directGetOnce(attempt, stream, body, n)
		stop()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
			return out, err
		}
	}
}

// shortDirectGets is how many attempts of hedgeEvery a directGet makes
// before it waits longer.
const shortDirectGets = 3

// directGetOnce is one attempt of directGet.
func (s *Store) directGetOnce(ctx context.Context, stream string, body []byte, n int) ([]msg, error) {
	subj := apiPrefix + "DIRECT.GET." + stream
	if n <= 1 {
		r, err := s.nc.RequestWithContext(ctx, subj, body)
		if err != nil {
			return nil, err
		}
		m, done, err := directMsg(r)
		if err != nil || done {
			return nil, err
		}
		return []msg{m}, nil
	}
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(subj, inbox, body); err != nil {
		return nil, err
	}
	var out []msg
	for {
		r, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if len(out) > 0 {
				return out, nil // what came is good; the caller asks again
			}
			return nil, err
		}
		m, done, err := directMsg(r)
		if err != nil {
			return out, err
		}
		if done {
			return out, nil
		}
		out = append(out, m)
		if len(out) >= n {
			return out, nil
		}
	}
}

// directMsg decodes one answer to a direct get: done at the end of a batch
// or when there is no message.
func directMsg(r *nats.Msg) (msg, bool, error) {
	if len(r.Data) == 0 && r.Header != nil {
		switch st := r.Header.Get("Status"); st {
		case "":
		case "404", "204":
			return msg{}, true, nil
		case "503":
			return msg{}, true, nats.ErrNoResponders
		default:
			return msg{}, true, fmt.Errorf("jsstore: direct get: status %s %s", st, r.Header.Get("Description"))
		}
	}
	seq, err := strconv.ParseUint(r.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return msg{}, true, fmt.Errorf("jsstore: direct get answer without a sequence: %w", err)
	}
	return msg{subj: r.Header.Get(jetstream.SubjectHeader), seq: seq, hdr: r.Header, data: r.Data}, false, nil
}

type purgeResponse struct {
	apiResponse
	Purged uint64 `json:"purged"`
}

// purge removes the stream's messages below seq.
func (s *Store) purge(ctx context.Context, stream string, seq uint64) (uint64, error) {
	var r purgeResponse
	err := s.request(ctx, "STREAM.PURGE."+stream, struct {
		Seq uint64 `json:"seq"`
	}{seq}, &r)
	return r.Purged, err
}

type namesResponse struct {
	apiResponse
	Total   int      `json:"total"`
	Offset  int      `json:"offset"`
	Limit   int      `json:"limit"`
	Streams []string `json:"streams"`
}

// streamNames lists the streams whose subjects fall under subj.
func (s *Store) streamNames(ctx context.Context, subj string) ([]string, error) {
	var out []string
	for {
		var r namesResponse
		err := s.request(ctx, "STREAM.NAMES", struct {
			Offset  int    `json:"offset"`
			Subject string `json:"subject,omitempty"`
		}{len(out), subj}, &r)
		if err != nil {
			return nil, err
		}
		out = append(out, r.Streams...)
		if len(r.Streams) == 0 || len(out) >= r.Total {
			return out, nil
		}
	}
}

type accountLimits struct {
	MaxStore int64 `json:"max_storage"`
}

type accountInfo struct {
	apiResponse
	Store  int64         `json:"storage"`
	Limits accountLimits `json:"limits"`
	Tiers  map[string]struct {
		Store  int64         `json:"storage"`
		Limits accountLimits `json:"limits"`
	} `json:"tiers"`
}

// retry runs f until it succeeds, fails for good, or RetryFor passes
// (then it returns the last error); it waits between attempts with
// backoff and stops when the store closes.
func (s *Store) retry(what string, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(s.cfg.RetryFor)
	wait := 20 * time.Millisecond
	for {
		err := f(s.ctx)
		if err == nil || !transient(err) {
			return err
		}
		if time.Now().Add(wait).After(deadline) || s.ctx.Err() != nil {
			return fmt.Errorf("jsstore: %s: gave up after %v: %w", what, s.cfg.RetryFor, err)
		}
		if !s.sleep(wait) {
			return fmt.Errorf("%w: %s: %v", store.ErrClosed, what, err)
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// sleep waits d unless the store closes first (then it reports false).
func (s *Store) sleep(d time.Duration) bool { return clock.Sleep(s.ctx, clock.Real{}, d) }

// Lead asks that partition p's stream be led by the server this store is
// connected to, if another server leads it: an owner whose stream's
// leader is its own server writes and reads without crossing a route.
// The partition's writer does it at once if the stream exists, or once it
// has made it, with no write in flight: a publish that reaches a
// leader as it steps down is dropped unanswered, and would wait out
// AckTimeout before it is sent again. The writer then waits, for at most
// leadWait, until a new leader serves (this store's server, as asked, or
// another JetStream chose), and writes on regardless.
func (s *Store) Lead(p store.PartitionID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		pt := s.partLocked(p)
		pt.lead = true
		s.startLocked(pt)
	}
}

// leadWait bounds a leader hand-over the writer waits for.
const leadWait = 2 * time.Second

// takeLead moves p's stream leader here if Lead asked for it and the
// stream exists; the writer calls it between writes.
func (s *Store) takeLead(pt *part) {
	s.mu.Lock()
	want := pt.leadDue()
	if want {
		pt.lead = false
	}
	s.mu.Unlock()
	if !want {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, leadWait)
	defer cancel()
	t0 := time.Now()
	if err := s.moveLeader(ctx, pt.stream); err != nil {
		s.log.Info("jsstore: could not move a partition's stream leader to its owner", "partition", pt.id, "err", err)
		return
	}
	s.log.Debug("jsstore: moved a partition's stream leader to its owner", "partition", pt.id, "took", time.Since(t0))
}

// moveLeader asks stream's leader to hand over to this store's server,
// then waits until a new leader serves; an error says the hand-over did
// not happen, or went to another server.
func (s *Store) moveLeader(ctx context.Context, stream string) error {
	me := s.nc.ConnectedServerName()
	if me == "" {
		return nil
	}
	leader, err := s.streamLeader(ctx, stream)
	if err != nil || leader == "" || leader == me {
		return err
	}
	type placement struct {
		Preferred string `json:"preferred"`
	}
	req := struct {
		Placement placement `json:"placement"`
	}{placement{me}}
	var r struct {
		apiResponse
		Success bool `json:"success"`
	}
	if err := s.request(ctx, "STREAM.LEADER.STEPDOWN."+stream, req, &r); err != nil {
		return fmt.Errorf("jsstore: asking %s's leader %s to hand over to %s: %w", stream, leader, me, err)
	}
	// Until a leader other than the old one serves: this store's server,
	// or another if JetStream chose so (writes may go on then; waiting on
	// would only hold them).
	old := leader
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if leader, err = s.streamLeader(ctx, stream); err == nil && leader != "" && leader != old {
			if leader != me {
				return fmt.Errorf("jsstore: %s was handed over to %s, not %s", stream, leader, me)
			}
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("jsstore: %s has not been handed over to %s in %v (leader %q, %v)", stream, me, leadWait, leader, err)
		}
	}
}
