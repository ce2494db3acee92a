package sched

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden output of testdata/*.txt")

// harness owns the messages a scheduler refers to, as the queue does.
type harness struct {
	s     *Sched
	now   int64
	seq   uint64
	items map[uint64]*item
	order map[uint64]int // push order, for FIFO checks
	n     int
	spare int // receivers waiting besides the one popping (Headroom)
}

type item struct {
	Entry
	tenant string
	sent   int64
	state  string // ready, inflight
}

func newHarness(cfg Config) *harness {
	h := &harness{now: 1_000_000, items: map[uint64]*item{}, order: map[uint64]int{}, spare: math.MaxInt}
	h.s = New(cfg, func(seq uint64) (*Entry, int64, string, bool) {
		it, ok := h.items[seq]
		if !ok {
			return nil, 0, "", false
		}
		return &it.Entry, it.sent, it.tenant, true
	})
	return h
}

func (h *harness) push(tenant string, lane int, age int64, again bool) uint64 {
	h.seq++
	it := &item{tenant: tenant, sent: h.now - age, state: "ready"}
	h.items[h.seq] = it
	h.n++
	h.order[h.seq] = h.n
	it.Again = again
	h.s.Push(h.now, h.seq, &it.Entry, tenant, lane)
	return h.seq
}

func (h *harness) pop(part int) (uint64, bool) {
	seq, ok := h.s.Pop(h.now, part, h.spare)
	if ok {
		it := h.items[seq]
		if it.state != "ready" {
			panic(fmt.Sprintf("popped %d in state %s", seq, it.state))
		}
		it.state = "inflight"
	}
	return seq, ok
}

func (h *harness) del(seq uint64) {
	it, ok := h.items[seq]
	if !ok {
		return
	}
	h.s.Remove(&it.Entry)
	delete(h.items, seq)
}

// release makes an in-flight message ready again (visibility expired).
func (h *harness) release(seq uint64, lane int) {
	it := h.items[seq]
	it.state = "ready"
	h.n++
	h.order[seq] = h.n
	h.s.Push(h.now, seq, &it.Entry, it.tenant, lane)
}

type args map[string]string

func (a args) str(k, def string) string {
	if v, ok := a[k]; ok {
		return v
	}
	return def
}

func (a args) int(k string, def int) int {
	if v, ok := a[k]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", k, v, err))
		}
		return n
	}
	return def
}

func (a args) float(k string, def float64) float64 {
	if v, ok := a[k]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", k, v, err))
		}
		return f
	}
	return def
}

func (a args) dur(k string, def time.Duration) time.Duration {
	if v, ok := a[k]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q: %v", k, v, err))
		}
		return d
	}
	return def
}

func parseConfig(a args) Config {
	return Config{
		Fair:            a.str("fair", "true") == "true",
		Shards:          a.int("shards", 1),
		ShardsPerTenant: a.int("per-tenant", 0),
		RetryLevels:     a.int("retry", 0),
		SidelineAge:     a.dur("sideline", 0).Milliseconds(),
		Adaptive:        a.str("adaptive", "false") == "true",
		LowerLaneShare:  a.float("share", 0),
		Headroom:        a.int("headroom", 0),
		Limits: Limits{
			MaxInFlight:     a.int("cap", 0),
			ReceiveRate:     a.float("rrate", 0),
			ReceiveBurst:    a.float("rburst", 0),
			SendRate:        a.float("srate", 0),
			SendBurst:       a.float("sburst", 0),
			SendRateGrowth:  a.float("growth", 0),
			SendRateCeiling: a.float("ceiling", 0),
			BacklogTarget:   a.int("backlog", 0),
		},
	}
}

// run executes one command of the trace language and returns its output.
//
//	config k=v...            new scheduler (see parseConfig)
//	set k=v...               change the running scheduler's configuration
//	override t=T k=v...      per-tenant limits (w, cap, rrate, rburst, srate, backlog)
//	push t=T [n=N] [lane=L] [age=D] [again=true]
//	pop [n=N] [part=P]       prints tenant:seq per message, or "none"
//	drain [part=P]           pops until none, deleting each, and prints a tenant histogram in order of first pick
//	settle seq=S [lane=L]    an in-flight message becomes ready again
//	delete seq=S | t=T       deletes one message, or every in-flight one of T
//	advance D
//	spare N                  receivers waiting besides the popping one (default: many)
//	send t=T [n=N]           ok, or throttled with the retry hint
//	stats
func (h *harness) run(cmd string, a args) string {
	switch cmd {
	case "config":
		*h = *newHarness(parseConfig(a))
		return ""
	case "set":
		cfg := parseConfig(a)
		cfg.Overrides = h.s.Config().Overrides
		h.s.SetConfig(h.now, cfg)
		return ""
	case "override":
		cfg := h.s.Config()
		if cfg.Overrides == nil {
			cfg.Overrides = map[string]Limits{}
		}
		cfg.Overrides[a.str("t", "")] = Limits{Weight: a.float("w", 0), MaxInFlight: a.int("cap", 0),
			ReceiveRate: a.float("rrate", 0), ReceiveBurst: a.float("rburst", 0), SendRate: a.float("srate", 0),
			SendBurst: a.float("sburst", 0), BacklogTarget: a.int("backlog", 0)}
		h.s.SetConfig(h.now, cfg)
		return ""
	case "push":
		var seqs []string
		for i := 0; i < a.int("n", 1); i++ {
			seqs = append(seqs, strconv.FormatUint(h.push(a.str("t", ""), a.int("lane", 0), a.dur("age", 0).Milliseconds(), a.str("again", "") == "true"), 10))
		}
		return ""
	case "pop":
		var out []string
		for i := 0; i < a.int("n", 1); i++ {
			seq, ok := h.pop(a.int("part", -1))
			if !ok {
				out = append(out, "none")
				break
			}
			out = append(out, fmt.Sprintf("%s:%d", h.items[seq].tenant, seq))
		}
		return strings.Join(out, " ")
	case "drain":
		var order []string
		count := map[string]int{}
		for {
			seq, ok := h.pop(a.int("part", -1))
			if !ok {
				break
			}
			t := h.items[seq].tenant
			if count[t] == 0 {
				order = append(order, t)
			}
			count[t]++
			h.del(seq)
		}
		var out []string
		for _, t := range order {
			out = append(out, fmt.Sprintf("%s=%d", t, count[t]))
		}
		return strings.Join(out, " ")
	case "settle":
		h.release(uint64(a.int("seq", 0)), a.int("lane", 0))
		return ""
	case "delete":
		if t, ok := a["t"]; ok {
			var seqs []uint64
			for s, it := range h.items {
				if it.tenant == t && it.state == "inflight" {
					seqs = append(seqs, s)
				}
			}
			for _, s := range seqs {
				h.del(s)
			}
			return ""
		}
		h.del(uint64(a.int("seq", 0)))
		return ""
	case "advance":
		d, err := time.ParseDuration(a.str("_", "0s"))
		if err != nil {
			panic(err)
		}
		h.now += d.Milliseconds()
		return ""
	case "spare":
		h.spare = a.int("_", math.MaxInt)
		return ""
	case "send":
		ok, wait := h.s.AllowSend(h.now, a.str("t", ""), a.int("n", 1))
		if ok {
			return "ok"
		}
		return fmt.Sprintf("throttled retry-after=%s", wait)
	case "stats":
		var out []string
		for _, ts := range h.s.Stats(h.now) {
			line := fmt.Sprintf("%s ready=%d inflight=%d lanes=%v parts=%v", ts.Name, ts.Ready, ts.InFlight, ts.Lanes, ts.Shards)
			if ts.Spilled {
				line += " spilled"
			}
			if ts.Capped {
				line += " capped"
			}
			if ts.Engaged != 0 {
				line += fmt.Sprintf(" fresh-first-since=-%s", time.Duration(h.now-ts.Engaged)*time.Millisecond)
			}
			out = append(out, line)
		}
		sort.Strings(out)
		line := fmt.Sprintf("tenants=%d ready=%d sidelined=%d", h.s.Tenants(), h.s.Ready(), h.s.Sidelined)
		if h.s.HeldBack > 0 {
			line += fmt.Sprintf(" held-back=%d", h.s.HeldBack)
		}
		out = append(out, line)
		return strings.Join(out, "\n")
	}
	panic("unknown command " + cmd)
}

// TestTraces runs the scheduler scripts in testdata and compares their
// output with the golden output under each command (-update rewrites it).
func TestTraces(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no traces in testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			h := newHarness(Config{Fair: true})
			sc := bufio.NewScanner(strings.NewReader(string(data)))
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			for i := 0; i < len(lines); i++ {
				line := lines[i]
				if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
					out.WriteString(line + "\n")
					continue
				}
				// A command, then "----", then its expected output up to a blank line.
				out.WriteString(line + "\n")
				fields := strings.Fields(line)
				a := args{}
				for _, f := range fields[1:] {
					k, v, ok := strings.Cut(f, "=")
					if !ok {
						k, v = "_", f
					}
					a[k] = v
				}
				got := h.run(fields[0], a)
				var want []string
				if i+1 < len(lines) && lines[i+1] == "----" {
					i++
					for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
						i++
						want = append(want, lines[i])
					}
				}
				if got != "" || len(want) > 0 {
					// Output ends at a blank line.
					out.WriteString("----\n" + got + "\n\n")
					if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "" {
						i++
					}
				}
				if !*update && got != strings.Join(want, "\n") {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, i+1, line, got, strings.Join(want, "\n"))
				}
			}
			if *update {
				if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
