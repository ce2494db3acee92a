package admin

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sluicemq/sluice/internal/sigv4"
)

// The dashboard's sign-in: a browser cannot sign requests, so it trades
// a principal's access key and secret (or the admin token) for a session
// once, at POST /api/session, and its requests then carry the session's
// cookie. The secret is checked and forgotten: the session holds who it
// is, not the secret. The cookie is HttpOnly (no script reads it) and
// SameSite=Strict (another site's page cannot send it); a change (not
// GET or HEAD) must also carry the session's CSRF token in X-Sluice-CSRF,
// which only the dashboard's own page has. A session lasts SessionTTL;
// DELETE /api/session ends it (sign-out).

const (
	// SessionTTL is how long a dashboard session lasts.
	SessionTTL = time.Hour
	// sessionCookie names the cookie a session travels in.
	sessionCookie = "sluice_session"
	// csrfHeader carries a session's CSRF token on changes.
	csrfHeader = "X-Sluice-CSRF"
	// uiHeader marks the dashboard's own requests: a refusal then has no
	// WWW-Authenticate, so the browser shows the sign-in page instead of
	// its own prompt.
	uiHeader = "X-Sluice-UI"
	// maxSessions bounds the sessions kept: past it, a sign-in first lets
	// the expired ones go, then the oldest.
	maxSessions = 10000
)

// session is a signed-in browser: who it acts as, the CSRF token its
// changes carry, and when it ends.
type session struct {
	caller  caller
	csrf    string
	expires time.Time
}

// sessions are the dashboard's sessions, by id (the cookie's value).
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
}

func (s *sessions) add(c caller, now time.Time) (id string, ses *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]*session{}
	}
	if len(s.byID) >= maxSessions {
		var oldestID string
		for k, v := range s.byID {
			if now.After(v.expires) {
				delete(s.byID, k)
			} else if oldestID == "" || v.expires.Before(s.byID[oldestID].expires) {
				oldestID = k
			}
		}
		if len(s.byID) >= maxSessions {
			delete(s.byID, oldestID)
		}
	}
	id, ses = randomToken(), &session{caller: c, csrf: randomToken(), expires: now.Add(SessionTTL)}
	s.byID[id] = ses
	return id, ses
}

func (s *sessions) get(id string, now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses := s.byID[id]
	if ses != nil && now.After(ses.expires) {
		delete(s.byID, id)
		return nil
	}
	return ses
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sessionOf is r's session, if its cookie names a live one.
func (a *Access) sessionOf(r *http.Request) (string, *session) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return "", nil
	}
	return ck.Value, a.sessions.get(ck.Value, a.now())
}

// signIn serves POST /api/session: {"access_key_id", "secret_access_key"
// (and "session_token" for a key that has one)} of a principal, or
// {"token"}: the admin token. It answers who the session acts as and its
// CSRF token, and sets the session's cookie.
func (a *Access) signIn(w http.ResponseWriter, r *http.Request) {
	var in struct {
		AccessKeyID     string `json:"access_key_id"`
		SecretAccessKey string `json:"secret_access_key"`
		SessionToken    string `json:"session_token"`
		Token           string `json:"token"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		refuse(w, http.StatusBadRequest, "InvalidParameterValue", "The body must be {\"access_key_id\": ..., \"secret_access_key\": ...} or {\"token\": ...}.")
		return
	}
	var c caller
	switch {
	case in.Token != "" && a.Token != "" && subtle.ConstantTimeCompare([]byte(in.Token), []byte(a.Token)) == 1:
		c = caller{operator: true}
	case in.AccessKeyID != "" && a.Credentials != nil:
		p := a.Credentials.Lookup(in.AccessKeyID)
		if p == nil || !secretOK(p, in.SecretAccessKey, in.SessionToken) {
			break
		}
		c = caller{principal: p}
	}
	if !c.operator && c.principal == nil {
		refuse(w, http.StatusForbidden, "InvalidClientTokenId", "The access key, secret or token is not right.")
		return
	}
	id, ses := a.sessions.add(c, a.now())
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", MaxAge: int(SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	writeJSON(w, http.StatusOK, whoJSON(c, ses))
}

// secretOK compares a principal's secret (and session token) in
// constant time.
func secretOK(p *sigv4.Principal, secret, token string) bool {
	ok := subtle.ConstantTimeCompare([]byte(secret), []byte(p.SecretAccessKey)) == 1
	tok := p.SessionToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(p.SessionToken)) == 1
	return ok && tok
}

// signOut serves DELETE /api/session: the session ends, and its cookie.
func (a *Access) signOut(w http.ResponseWriter, r *http.Request) {
	if id, ses := a.sessionOf(r); ses != nil {
		a.sessions.end(id)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	writeJSON(w, http.StatusOK, map[string]bool{"signed_out": true})
}

// whoJSON is who a request acts as, for the dashboard (GET /api/session):
// the operator, or a principal's name; a session's CSRF token.
func whoJSON(c caller, ses *session) map[string]any {
	out := map[string]any{"operator": c.operator}
	if c.principal != nil {
		out["principal"] = c.principal.Name
	}
	if ses != nil {
		out["csrf"] = ses.csrf
		out["expires"] = ses.expires.UTC().Format(time.RFC3339)
	}
	return out
}
