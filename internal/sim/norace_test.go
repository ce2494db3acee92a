//go:build !race

package sim

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
