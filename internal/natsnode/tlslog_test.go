package natsnode

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogAdapterRecognisesRouteTLS feeds the adapter the lines nats-server
// v2.15.2 logs (client.go, doTLSHandshake) for a route whose TLS handshake
// failed, with the errors Go's crypto/tls gives on either side, and the
// line a node without route TLS logs for a peer's TLS handshake.
func TestLogAdapterRecognisesRouteTLS(t *testing.T) {
	t.Parallel()
	const prefix = "127.0.0.1:6222 - rid:9 - TLS route handshake error: "
	for _, tc := range []struct {
		name      string
		hasTLS    bool
		hasSecret bool
		line      string
		reason    string
	}{
		{"unknown CA", true, false, prefix + "tls: failed to verify certificate: x509: certificate signed by unknown authority (CN=n3 SHA-256: 01e3)",
			"the peer's certificate is not signed by a CA of this node's CA bundle"},
		{"refused by the peer", true, false, prefix + "remote error: tls: bad certificate", "the peer refused this node's certificate"},
		{"expired", true, false, prefix + "tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2026-11-26T02:37:16Z is after 2026-11-26T02:36:16Z",
			"the peer's certificate has expired or is not valid yet"},
		{"expired, says the peer", true, false, prefix + "remote error: tls: expired certificate", "the peer refused this node's certificate: it has expired"},
		{"another host", true, false, prefix + "tls: failed to verify certificate: x509: certificate is valid for 10.0.0.2, not 10.0.0.3",
			"the peer's certificate does not name the host this node dialled it at"},
		{"server only", true, false, prefix + "tls: failed to verify certificate: x509: certificate specifies an incompatible key usage",
			"the certificate's extended key usage does not allow this use"},
		{"no certificate", true, false, prefix + "tls: client didn't provide a certificate", "the peer presented no certificate"},
		{"plain peer", true, false, prefix + "tls: first record does not look like a TLS handshake", "the peer does not use TLS on its routes"},
		{"a TLS peer, here without TLS", false, false, "127.0.0.1:6222 - rid:9 - authentication error", "the peer sent something other than a route's CONNECT: most likely it uses route TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			a := newLogAdapter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "sluice")
			a.hasTLS, a.hasSecret = tc.hasTLS, tc.hasSecret
			a.Errorf("%s", tc.line)
			a.Errorf("%s", tc.line)
			err := a.tlsState()
			if !errors.Is(err, ErrRouteTLS) || !strings.Contains(err.Error(), "(connection 127.0.0.1:6222): "+tc.reason) {
				t.Errorf("tls %v, want ErrRouteTLS saying %s", err, tc.reason)
			}
			if auth, _ := a.authState(); auth != nil {
				t.Errorf("auth %v", auth)
			}
			// Once at Warn, the repetition at Debug.
			log := buf.String()
			msg := `msg="route TLS handshake failed; the route is refused" peer_addr=127.0.0.1:6222 reason="` + tc.reason
			if strings.Count(log, "level=WARN "+msg) != 1 || strings.Count(log, "level=DEBUG "+msg) != 1 || strings.Contains(log, "level=ERROR") {
				t.Errorf("want the line once at Warn, then at Debug; log:\n%s", log)
			}
		})
	}
	// A node with a secret and without TLS cannot tell a peer without the
	// secret from a peer with TLS: it says both.
	var buf bytes.Buffer
	a := newLogAdapter(slog.New(slog.NewTextHandler(&buf, nil)), "sluice")
	a.hasSecret = true
	a.Errorf("%s", "127.0.0.1:50000 - rid:7 - authentication error")
	if auth, _ := a.authState(); !errors.Is(auth, ErrRouteAuth) || !strings.Contains(auth.Error(), "the peer has no cluster secret (so its own route listener accepts any node), or it uses route TLS and this node does not") {
		t.Errorf("auth %v", auth)
	}
}
