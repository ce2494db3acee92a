//go:build unix

package peers

import "syscall"

// processCPU is this process's user and system CPU time so far, in
// seconds; ok is false when it cannot be read.
func processCPU() (secs float64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return seconds(ru.Utime) + seconds(ru.Stime), true
}

func seconds(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
