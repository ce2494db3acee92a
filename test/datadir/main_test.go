// Package datadir checks, from the outside, that a data directory has one
// user at a time: it runs the real `sluice serve` and `sluice verify`
// binaries on one temp directory and talks to the servers with the AWS
// SDK. A second server, or a check, started while a server runs is
// refused at once, naming the directory and the server's pid, and changes
// nothing; what the first server acknowledged all comes back after a
// restart; a server killed with SIGKILL leaves no stale lock behind.
package datadir

import (
	"testing"

	"github.com/sluicemq/sluice/test/testkit"
)

// TestMain builds the real binary once, runs the tests against it, and
// fails them if any goroutine outlives them.
func TestMain(m *testing.M) { testkit.Main(m, "sluice-datadir-", true, &bin) }

// bin is the `sluice` binary TestMain built, set before any test runs and
// never changed.
var bin string
