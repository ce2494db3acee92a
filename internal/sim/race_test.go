//go:build race

package sim

// raceEnabled: the tests run under the race detector, some ten times
// slower; the longest runs are left to the tests without it.
const raceEnabled = true
