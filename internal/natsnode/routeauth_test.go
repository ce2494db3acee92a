package natsnode

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogAdapterRecognisesRouteAuth feeds the adapter the lines
// nats-server v2.15.2 logs (client.go: authViolation on the refusing
// side, processErr on the refused one) when a route presents another
// cluster secret or none, in the form it calls Errorf with.
func TestLogAdapterRecognisesRouteAuth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		hasSecret bool
		line      string
		want      string // in the error
		noSecret  bool   // Ready must fail at once
	}{
		{"refused a peer's secret", true, `127.0.0.1:50000 - rid:7 - authentication error - User "sluice"`,
			"this node refused a route from a peer (connection 127.0.0.1:50000): the peer's cluster secret differs from this node's", false},
		{"refused a peer without one", true, `127.0.0.1:50000 - rid:7 - authentication error`,
			"the peer has no cluster secret", false},
		{"refused by a peer", true, `127.0.0.1:6222 - rid:9 - Route Error 'Authorization Violation'`,
			"a peer (route 127.0.0.1:6222) refused this node's route: its cluster secret differs from this node's", false},
		{"refused by a peer for want of one", false, `127.0.0.1:6222 - rid:9 - Route Error 'Authorization Violation'`,
			"it requires a cluster secret and this node has none", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			a := newLogAdapter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "sluice")
			a.hasSecret = tc.hasSecret
			a.Errorf("%s", tc.line)
			a.Errorf("%s", tc.line)
			auth, noSecret := a.authState()
			if !errors.Is(auth, ErrRouteAuth) || !strings.Contains(auth.Error(), tc.want) {
				t.Errorf("auth %v, want ErrRouteAuth saying %s", auth, tc.want)
			}
			if (noSecret != nil) != tc.noSecret || (noSecret != nil && !errors.Is(noSecret, ErrRouteAuth)) {
				t.Errorf("noSecret %v", noSecret)
			}
			if _, mismatch, dup := a.state(); mismatch != nil || dup != nil {
				t.Errorf("mismatch %v, dup %v", mismatch, dup)
			}
			// Once at Error, the repetition at Debug.
			log := buf.String()
			msg := `msg="cluster secret does not match a peer's; the route is refused" peer_addr=`
			if strings.Count(log, "level=ERROR "+msg) != 1 || strings.Count(log, "level=DEBUG "+msg) != 1 {
				t.Errorf("want the line once at Error, then at Debug; log:\n%s", log)
			}
		})
	}
	// A client's refused token is not a route's.
	var buf bytes.Buffer
	a := newLogAdapter(slog.New(slog.NewTextHandler(&buf, nil)), "sluice")
	a.Errorf("%s", `127.0.0.1:50002 - cid:5 - authentication error - Token "[REDACTED]"`)
	if auth, _ := a.authState(); auth != nil {
		t.Errorf("a client's authentication error taken for a route's: %v", auth)
	}
}
