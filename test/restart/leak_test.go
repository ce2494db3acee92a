package restart

import (
	"testing"

	"github.com/sluicemq/sluice/test/testkit"
)

// TestMain builds the real binary once, runs the tests against it, and
// fails them if any goroutine outlives them.
func TestMain(m *testing.M) { testkit.Main(m, "sluice-restart-", true, &bin) }

// bin is the `sluice` binary TestMain built, set before any test runs and
// never changed.
var bin string
