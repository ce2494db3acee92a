package peers

import (
	"context"

	"github.com/prometheus/procfs"
)

// ProcessCPU is a broker's server process on this machine, by its PID:
// its CPU time, read from /proc (Linux, with prometheus/procfs), gives the
// broker's server CPU a message where the broker reports none itself
// (RabbitMQ, NATS). 0 is no process: not measured.
type ProcessCPU int

// CPUSeconds is the process's user and system CPU time so far, all its
// threads; ok is false without a PID or where /proc cannot be read.
func (p ProcessCPU) CPUSeconds(context.Context) (secs float64, ok bool) {
	if p <= 0 {
		return 0, false
	}
	proc, err := procfs.NewProc(int(p))
	if err != nil {
		return 0, false
	}
	stat, err := proc.Stat()
	if err != nil {
		return 0, false
	}
	return stat.CPUTime(), true
}
