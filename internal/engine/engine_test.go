package engine

import (
	"io"
	"log/slog"
	"testing"

	"github.com/sluicemq/sluice/internal/clock"
	"github.com/sluicemq/sluice/internal/store"
)

// openEngine opens an engine over a store, closed at the end of the test.
func openEngine(t *testing.T, s store.Store, clk clock.Clock) *Engine {
	t.Helper()
	e, err := Open(Config{Store: s, Region: "us-east-1", AccountID: "000000000000", MaxQueues: 1000, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
