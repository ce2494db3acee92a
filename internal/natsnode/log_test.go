package natsnode

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
)

// TestLogAdapterRecognisesConflicts feeds the adapter the lines
// nats-server v2.15.2 logs (route.go), in the form it calls Errorf with.
func TestLogAdapterRecognisesConflicts(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	a := newLogAdapter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "sluice")

	// The refusing side, then the refused side (the -ERR it got back).
	a.Errorf("%s - rid:%d - "+`Rejecting connection, cluster name "other" does not match "sluice"`, "127.0.0.1:50000", 7)
	a.Errorf("%s - rid:%d - cluster name from remote server conflicts", "127.0.0.1:50000", 7)
	a.Errorf("127.0.0.1:6222 - rid:9 - Route Error %s", `'Rejecting connection, cluster name "sluice" does not match "other"'`)
	_, mismatch, dup := a.state()
	if !errors.Is(mismatch, ErrClusterNameMismatch) || dup != nil {
		t.Fatalf("mismatch %v, dup %v", mismatch, dup)
	}
	if want := `connection 127.0.0.1:6222) uses cluster name "other", this node "sluice"`; !strings.Contains(mismatch.Error(), want) {
		t.Errorf("mismatch %q does not say %q", mismatch, want)
	}

	a.Errorf("%s - rid:%d - "+"Remote server has a duplicate name: %q", "127.0.0.1:50001", 8, "n1")
	if _, _, dup = a.state(); !errors.Is(dup, ErrDuplicateNodeName) || !strings.Contains(dup.Error(), `also named "n1"`) {
		t.Errorf("dup %v", dup)
	}

	a.Fatalf("Error listening on router port: %d - %v", 6222, syscall.EADDRINUSE)
	if fatal, _, _ := a.state(); !errors.Is(fatal, syscall.EADDRINUSE) {
		t.Errorf("fatal %v does not wrap EADDRINUSE", fatal)
	}

	// The first of each conflict at Error, its repetitions at Debug.
	log := buf.String()
	for _, want := range []string{
		`level=ERROR msg="cluster name does not match a peer's; the route is refused" cluster=sluice peer_cluster=other peer_addr=127.0.0.1:50000`,
		`level=DEBUG msg="127.0.0.1:50000 - rid:7 - cluster name from remote server conflicts"`,
		`level=DEBUG msg="cluster name does not match a peer's; the route is refused" cluster=sluice peer_cluster=other peer_addr=127.0.0.1:6222`,
		`level=ERROR msg="another node uses this node's name; the route is refused" peer_addr=127.0.0.1:50001`,
		`level=ERROR msg="Error listening on router port: 6222 - address already in use" fatal=true`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s\nlog:\n%s", want, log)
		}
	}
}
