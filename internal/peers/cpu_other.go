//go:build !unix

package peers

// processCPU cannot read the process's CPU time here.
func processCPU() (secs float64, ok bool) { return 0, false }
