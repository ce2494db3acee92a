package admin

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/sigv4"
)

// GuardOptions say who may use the admin address.
type GuardOptions struct {
	// Token, when set, is required on every request but /healthz: as
	// "Authorization: Bearer <token>", or as the password of HTTP Basic
	// authentication (any user name), so a browser's own prompt opens the
	// dashboard.
	Token string
	// Credentials, when set, are the principals who may sign requests
	// (SigV4) to act as themselves, each on its own queues and topics
	// (Access); a request neither signed nor with the token is refused.
	Credentials *sigv4.Credentials
	// Now dates signatures. Default time.Now.
	Now func() time.Time
	// AllowedHosts are Host header names accepted besides loopback ones
	// (for an admin address reached through a proxy or a DNS name). Without
	// a token only loopback and these are accepted: a page on another site
	// that rebinds its DNS name to 127.0.0.1 gets nothing.
	AllowedHosts []string
}

// Guard wraps the admin handler (and whatever else the admin address
// serves: /healthz, /debug/pprof) with what a browser or a stranger on
// the network must not get past:
//
//   - who the request acts as (Access): the operator (the token, or no
//     token and no credentials), or a principal whose signature holds,
//     and then only on the paths about queues and topics;
//   - the Host header: loopback names, or AllowedHosts (any host when a
//     token is set and AllowedHosts is empty: the token is the guard);
//   - for every request that changes something (not GET or HEAD): a JSON
//     Content-Type (a cross-site form or text/plain "simple request" is
//     refused), and an Origin, when the browser sends one, equal to the
//     Host; a request a browser marks Sec-Fetch-Site: cross-site is refused.
//
// Refusals answer with the API's JSON error body, naming the problem.
func Guard(next http.Handler, o GuardOptions) http.Handler {
	allowed := map[string]bool{}
	for _, h := range o.AllowedHosts {
		if h = strings.TrimSpace(strings.ToLower(h)); h != "" {
			allowed[h] = true
		}
	}
	// Who the request acts as first (refused before anything else is
	// said), then what a browser must not do.
	inner := Authenticated(sameSiteWrites(next), &Access{Token: o.Token, Credentials: o.Credentials, Now: o.Now})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := hostOnly(r.Host)
		if !isLoopbackHost(host) && !allowed[host] && (o.Token == "" && o.Credentials == nil || len(allowed) > 0) {
			refuse(w, http.StatusForbidden, "ForbiddenHost", fmt.Sprintf("The Host %q is not one this admin address answers to (loopback names, or --admin-allowed-hosts).", r.Host))
			return
		}
		if r.URL.Path == "/healthz" || o.Credentials != nil && (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/")) {
			// The dashboard's own files are public where principals sign
			// in: its page asks who is there before it shows anything.
			next.ServeHTTP(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// sameSiteWrites refuses a request that changes something (not GET or
// HEAD) unless it is JSON from this site.
func sameSiteWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" {
				refuse(w, http.StatusForbidden, "CrossSiteRequest", "A request from another site may not change anything here.")
				return
			}
			if origin := r.Header.Get("Origin"); origin != "" {
				u, err := url.Parse(origin)
				if err != nil || !strings.EqualFold(u.Host, r.Host) {
					refuse(w, http.StatusForbidden, "CrossOriginRequest", fmt.Sprintf("A request from %s may not change anything on %s.", origin, r.Host))
					return
				}
			}
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				refuse(w, http.StatusUnsupportedMediaType, "UnsupportedMediaType", "A request that changes something must have Content-Type: application/json.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

// tokenOK checks the Bearer token or the Basic password in constant time.
func tokenOK(r *http.Request, token string) bool {
	got := ""
	if _, pass, ok := r.BasicAuth(); ok {
		got = pass
	} else if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = strings.TrimSpace(b)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// hostOnly is a Host header without its port, lower case.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(strings.Trim(h, "[]"))
}

func isLoopbackHost(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
