package peers

import (
	"cmp"
	"slices"
)

// Report is what `sluice bench --json FILE` writes, and what the charts
// are drawn from.
type Report struct {
	// Version of this layout (1).
	Version int `json:"version"`
	// Date the runs started, RFC 3339.
	Date string `json:"date"`
	Host Host   `json:"host"`
	// Config is the command's workload and sweeps.
	Config  Config   `json:"config"`
	Results []Result `json:"results"`
}

// Host is the machine the runs were measured on.
type Host struct {
	CPUs      int    `json:"cpus"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	GoVersion string `json:"go"`
}

// Config is one invocation's settings.
type Config struct {
	Workload
	DurationS float64  `json:"duration_seconds"`
	Peers     []string `json:"peers"`
	Rounds    int      `json:"rounds"`
	Sizes     []int    `json:"sizes_bytes"`
	QueueCnts []int    `json:"queue_counts"`
	// Batch and Client are Sluice's (and sluice-cluster's): messages a
	// call, and "lean", "stdhttp" or "sdk".
	Batch   int    `json:"sluice_batch"`
	Client  string `json:"sluice_client"`
	Tenants int    `json:"sluice_tenants,omitempty"`
	// Command is the command line, for reproducing.
	Command string `json:"command"`
}

// Summary is the rounds of one peer at one size and queue count.
type Summary struct {
	Peer       string
	Durability string
	Size       int
	Queues     int
	// Rates are msgs/s a round, in round order; Median is theirs.
	Rates  []float64
	Median float64
	// SendMS and E2EMS are each latency percentile's median over rounds.
	SendMS, E2EMS map[string]float64
	// Backlogs are each round's backlog at the window's end; CPUMicros is
	// the median server CPU per message and ClientCPUMicros the load
	// generator's (0: not measured).
	Backlogs        []int64
	CPUMicros       float64
	ClientCPUMicros float64
}

// Summaries groups results by size, queue count and peer, in the order
// they first appear.
func Summaries(results []Result) []Summary {
	type key struct {
		peer         string
		size, queues int
	}
	var order []key
	groups := map[key][]Result{}
	for _, r := range results {
		k := key{r.Peer, r.Size, r.Queues}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		rs := groups[k]
		slices.SortStableFunc(rs, func(a, b Result) int { return cmp.Compare(a.Round, b.Round) })
		s := Summary{Peer: k.peer, Durability: rs[0].Durability, Size: k.size, Queues: k.queues,
			SendMS: map[string]float64{}, E2EMS: map[string]float64{}}
		var cpu, client []float64
		for _, r := range rs {
			s.Rates = append(s.Rates, r.Rate)
			s.Backlogs = append(s.Backlogs, r.Backlog)
			if r.ServerCPUMicros > 0 {
				cpu = append(cpu, r.ServerCPUMicros)
			}
			if r.ClientCPUMicros > 0 {
				client = append(client, r.ClientCPUMicros)
			}
		}
		s.Median = Median(s.Rates)
		s.CPUMicros, s.ClientCPUMicros = Median(cpu), Median(client)
		for _, p := range append(PercentileKeys(), "max") {
			var send, e2e []float64
			for _, r := range rs {
				if v, ok := r.SendLatencyMS[p]; ok {
					send = append(send, v)
				}
				if v, ok := r.E2ELatencyMS[p]; ok {
					e2e = append(e2e, v)
				}
			}
			if len(send) > 0 {
				s.SendMS[p] = Median(send)
			}
			if len(e2e) > 0 {
				s.E2EMS[p] = Median(e2e)
			}
		}
		out = append(out, s)
	}
	return out
}

// Median of vs (the mean of the middle two for an even count; 0 for none).
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
