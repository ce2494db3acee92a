package peers

import (
	"bytes"
	"context"
	"os"
	"strconv"
)

// ProcessCPU is a broker's server process on this machine, by its PID:
// its CPU time, read from /proc (Linux), gives the broker's server CPU a
// message where the broker reports none itself (RabbitMQ, NATS). 0 is no
// process: not measured.
type ProcessCPU int

// userHZ is the unit of /proc's CPU times: the kernel's USER_HZ, 100 on
// every architecture Go runs Linux on but alpha and ia64.
const userHZ = 100

// CPUSeconds is the process's user and system CPU time so far, all its
// threads; ok is false without a PID or where /proc cannot be read.
func (p ProcessCPU) CPUSeconds(context.Context) (secs float64, ok bool) {
	if p <= 0 {
		return 0, false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(int(p)) + "/stat")
	if err != nil {
		return 0, false
	}
	ticks, ok := statCPUTicks(stat)
	return float64(ticks) / userHZ, ok
}

// statCPUTicks parses /proc/PID/stat's utime and stime (fields 14 and 15
// in proc(5)) and returns their sum. The command (field 2) is in
// parentheses and may hold spaces and parentheses of its own, so the
// fields are counted from after its last closing one, where field 3
// starts.
func statCPUTicks(stat []byte) (uint64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, false
	}
	u, err1 := strconv.ParseUint(string(f[utime]), 10, 64)
	s, err2 := strconv.ParseUint(string(f[stime]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + s, true
}
