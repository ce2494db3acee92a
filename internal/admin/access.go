package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/forward"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/sigv4"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Access says who may use the admin API, and as whom.
//
//   - The operator: a request with the admin token (Token), or any
//     request when there is neither a token nor credentials (a developer
//     on a laptop, on loopback: the Guard keeps strangers' Host names
//     out). The operator sees and manages everything.
//   - A principal of the credentials file (Credentials): a request signed
//     with its access key as the AWS SDKs sign (SigV4), checked as the
//     SQS port checks it, and not seen before (a replayed request is
//     refused). A principal sees and manages only the queues and topics
//     its patterns allow, as on the SQS port: anything else is answered
//     as missing. Server-wide views (/metrics, the store, the cluster,
//     profiles) are the operator's.
//
// Anything else is refused before its body is read.
type Access struct {
	Token       string
	Credentials *sigv4.Credentials
	// Now is the clock signatures are dated against. Default time.Now.
	Now func() time.Time

	seen     replays
	sessions sessions // the dashboard's (session.go)
}

// maxSignedBody bounds the body of a signed request, read to check its
// signature before anything else reads it: the API's bodies are small
// JSON objects.
const maxSignedBody = 64 << 10

// A caller is who a request acts as.
type caller struct {
	operator  bool
	principal *sigv4.Principal // when not the operator
}

type callerKey struct{}

// callerOf is who r acts as. A request that came through no Access (the
// admin handler served on its own, as tests do) is the operator's.
func callerOf(r *http.Request) caller {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{operator: true}
}

// allows reports whether the caller may see and manage a queue or topic.
func (c caller) allows(name string) bool { return c.operator || c.principal.Allows(name) }

// refusal is a request Access refused: its status, code and message.
type refusal struct {
	status        int
	code, message string
}

// authenticate finds who r acts as, reading and checking a signed body
// (r.Body is then that body, read). A forwarded request (another node of
// the cluster took it and checked it already) is not checked for replay
// again, as it is the same request.
//
// A browser's request acts as its session (session.go), if its cookie
// names one: a change must then carry the session's CSRF token.
func (a *Access) authenticate(r *http.Request) (caller, *session, *refusal) {
	if a.Token != "" && tokenOK(r, a.Token) {
		return caller{operator: true}, nil, nil
	}
	if _, ses := a.sessionOf(r); ses != nil {
		if r.Method != http.MethodGet && r.Method != http.MethodHead &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(ses.csrf)) != 1 {
			return caller{}, nil, &refusal{http.StatusForbidden, "CrossSiteRequest", "A change in a dashboard session must carry the session's " + csrfHeader + " header."}
		}
		return ses.caller, ses, nil
	}
	// Without credentials, a signature means nothing (as on the SQS port,
	// where any goes): the request is taken as unsigned.
	signed := a.Credentials != nil && (strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-") || r.URL.Query().Has("X-Amz-Algorithm"))
	if !signed {
		if a.Token == "" && a.Credentials == nil {
			return caller{operator: true}, nil, nil
		}
		how := "the admin token (Authorization: Bearer <token>, or Basic with it as password)"
		if a.Credentials != nil {
			how = "a request signed with your access key (SigV4, as the AWS SDKs and `sluice` sign), or " + how
		}
		return caller{}, nil, &refusal{http.StatusUnauthorized, "Unauthorized", "The admin API needs " + how + "."}
	}
	now := a.now()
	sig, p, err := sigv4.Identify(r, a.Credentials, now)
	if err != nil {
		return caller{}, nil, identifyRefusal(err)
	}
	mismatch := &refusal{http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."}
	// A request that signs its body's hash (X-Amz-Content-Sha256) is
	// checked before its body is read, and the body against the hash
	// after; one that does not, once its body is read.
	claimed := sig.ClaimedPayload(r)
	replayed := &refusal{http.StatusForbidden, "RequestReplayed", "This signed request was received before: sign each request anew."}
	if claimed != "" {
		if !sig.VerifyClaimed(r, p) {
			return caller{}, nil, mismatch
		}
		if !forward.Forwarded(r) && !a.seen.first(sig.Signature, now) {
			return caller{}, nil, replayed
		}
	}
	body, ref := readSigned(r)
	if ref != nil {
		return caller{}, nil, ref
	}
	if !sig.Verify(r, body, p) {
		if claimed != "" {
			return caller{}, nil, &refusal{http.StatusBadRequest, "XAmzContentSHA256Mismatch", "The body does not have the SHA-256 hash the request's X-Amz-Content-Sha256 header states."}
		}
		return caller{}, nil, mismatch
	}
	if claimed == "" && !forward.Forwarded(r) && !a.seen.first(sig.Signature, now) {
		return caller{}, nil, replayed
	}
	return caller{principal: p}, nil, nil
}

func (a *Access) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// identifyRefusal words what sigv4.Identify found wrong.
func identifyRefusal(err error) *refusal {
	var inc *sigv4.Incomplete
	switch {
	case errors.As(err, &inc):
		return &refusal{http.StatusBadRequest, "IncompleteSignature", "The request signature is incomplete: " + inc.Why + "."}
	case errors.Is(err, sigv4.ErrUnknownKey), errors.Is(err, sigv4.ErrBadToken):
		return &refusal{http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid."}
	case errors.Is(err, sigv4.ErrBadDate):
		return &refusal{http.StatusBadRequest, "IncompleteSignature", "X-Amz-Date is not a valid ISO 8601 basic timestamp."}
	case errors.Is(err, sigv4.ErrSkewed), errors.Is(err, sigv4.ErrPresignExpired):
		return &refusal{http.StatusForbidden, "RequestExpired", "The request is dated more than 15 minutes from the server's clock, or has expired: " + err.Error() + "."}
	}
	return &refusal{http.StatusForbidden, "AccessDenied", err.Error()}
}

// readSigned reads a signed request's body (at most maxSignedBody), and
// leaves it in r.Body for the handler.
func readSigned(r *http.Request) ([]byte, *refusal) {
	if r.ContentLength > maxSignedBody {
		return nil, &refusal{http.StatusRequestEntityTooLarge, "RequestTooLarge", fmt.Sprintf("The admin API takes bodies of at most %d bytes.", maxSignedBody)}
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSignedBody+1))
	if err != nil {
		return nil, &refusal{http.StatusBadRequest, "IncompleteBody", "The request body could not be read: " + err.Error() + "."}
	}
	if len(body) > maxSignedBody {
		return nil, &refusal{http.StatusRequestEntityTooLarge, "RequestTooLarge", fmt.Sprintf("The admin API takes bodies of at most %d bytes.", maxSignedBody)}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// withCaller is r acting as c: in its context for the handlers, and, for
// a principal, its queue patterns as the broker's authorizer (so that a
// queue an action reaches besides its own, a redrive's destination, is
// checked too).
func withCaller(r *http.Request, c caller) *http.Request {
	ctx := context.WithValue(r.Context(), callerKey{}, c)
	if !c.operator {
		ctx = st.WithAuthorizer(ctx, c.principal.Allows)
	}
	return r.WithContext(ctx)
}

// operatorOnly reports whether a path is the operator's alone: what is
// not about a queue or topic a principal may own (the dashboard's files
// are public; what they show comes from the API).
func operatorOnly(path string) bool {
	for _, p := range []string{"/api/queues", "/api/topics", "/api/movetasks", "/api/session", "/ui", "/healthz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return false
		}
	}
	return true
}

// callerHeader says, on an admin request one node forwards to another
// (the queue's or topic's owner), who the node that took it found the
// caller to be: "operator", or "principal <access key>". The owner trusts
// it on forwarded requests alone (they come over the cluster's NATS, which
// only nodes reach); on any other request it is dropped.
const callerHeader = "X-Sluice-Admin-Caller"

// header is c as callerHeader says it.
func (c caller) header() string {
	if c.operator {
		return "operator"
	}
	return "principal " + c.principal.AccessKeyID
}

// forwardedCaller is who a forwarded request acts as, by callerHeader
// (ok false: the forwarding node did not say, as one from before it did).
func (a *Access) forwardedCaller(r *http.Request) (c caller, ok bool, ref *refusal) {
	v := r.Header.Get(callerHeader)
	switch key, isPrincipal := strings.CutPrefix(v, "principal "); {
	case v == "":
		return caller{}, false, nil
	case v == "operator":
		return caller{operator: true}, true, nil
	case isPrincipal && a.Credentials != nil && a.Credentials.Lookup(key) != nil:
		return caller{principal: a.Credentials.Lookup(key)}, true, nil
	}
	return caller{}, true, &refusal{http.StatusForbidden, "InvalidClientTokenId", "The forwarding node names a caller this node does not know (are the nodes' credentials files the same?)."}
}

// Authenticated serves h to the callers a allows, each as who it is: what
// a node serves for the admin requests other nodes forward to it (the
// Guard, which also checks Host names and cross-site writes, does this
// for requests that come to the admin address).
func Authenticated(h http.Handler, a *Access) http.Handler {
	signIn := sameSiteWrites(http.HandlerFunc(a.signIn))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/session" && r.Method == http.MethodPost {
			signIn.ServeHTTP(w, r)
			return
		}
		var c caller
		var ses *session
		var ref *refusal
		fc, said, fref := caller{}, false, (*refusal)(nil)
		if forward.Forwarded(r) {
			fc, said, fref = a.forwardedCaller(r)
		} else {
			r.Header.Del(callerHeader) // only a node may say it
		}
		switch {
		case said:
			c, ref = fc, fref
		default:
			c, ses, ref = a.authenticate(r)
		}
		if ref != nil {
			refuseAuth(w, r, ref)
			return
		}
		if r.URL.Path == "/api/session" {
			switch r.Method {
			case http.MethodGet:
				writeJSON(w, http.StatusOK, whoJSON(c, ses))
			case http.MethodDelete:
				a.signOut(w, r)
			default:
				refuse(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "/api/session takes GET (who), POST (sign in) and DELETE (sign out).")
			}
			return
		}
		if !c.operator && operatorOnly(r.URL.Path) {
			refuse(w, http.StatusForbidden, "OperatorOnly", fmt.Sprintf("%s is the operator's (the admin token's): a principal sees its own queues and topics under /api/queues, /api/topics and /api/movetasks.", r.URL.Path))
			return
		}
		h.ServeHTTP(w, withCaller(r, c))
	})
}

func refuseAuth(w http.ResponseWriter, r *http.Request, ref *refusal) {
	if ref.status == http.StatusUnauthorized && r.Header.Get(uiHeader) == "" { // the dashboard signs in on its own page
		w.Header().Set("WWW-Authenticate", `Basic realm="sluice admin", charset="UTF-8"`)
	}
	refuse(w, ref.status, ref.code, ref.message)
}

// replays remembers the signatures of the signed requests accepted in
// the last 2*MaxClockSkew: a request is dated within MaxClockSkew of the
// clock, so one that comes again is seen again before it expires.
type replays struct {
	mu   sync.Mutex
	seen map[string]time.Time // signature → when it was accepted
	next time.Time            // when to forget the old ones next
}

// maxReplays bounds the signatures remembered: past it, the oldest half
// goes (a caller that signs that many requests in 30 minutes can at worst
// replay one of its own).
const maxReplays = 1 << 18

// first reports whether sig was not seen before (and notes it).
func (s *replays) first(sig string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]time.Time{}
	}
	if _, ok := s.seen[sig]; ok {
		return false
	}
	if now.After(s.next) || len(s.seen) >= maxReplays {
		cutoff := now.Add(-2 * sigv4.MaxClockSkew)
		if len(s.seen) >= maxReplays {
			cutoff = now.Add(-sigv4.MaxClockSkew)
		}
		for k, t := range s.seen {
			if t.Before(cutoff) {
				delete(s.seen, k)
			}
		}
		s.next = now.Add(time.Minute)
	}
	s.seen[sig] = now
	return true
}

// onQueue serves h to a caller the queue of the path ({queue}) is
// allowed to; to anyone else, the answer a missing queue gets.
func (s *Server) onQueue(h http.HandlerFunc) http.HandlerFunc {
	return onScoped("queue", partition.NoQueue, h)
}

// onTopic is onQueue for the topic of the path ({topic}).
func (s *Server) onTopic(h http.HandlerFunc) http.HandlerFunc {
	return onScoped("topic", noTopic, h)
}

// onScoped serves h to a caller allowed the name in path value param,
// and answers anyone else with missing().
func onScoped(param string, missing func() error, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !callerOf(r).allows(r.PathValue(param)) {
			apiError(w, missing())
			return
		}
		h(w, r)
	}
}

func noTopic() error {
	return &st.Error{Code: st.CodeResourceNotFound, Message: "Topic does not exist."}
}
