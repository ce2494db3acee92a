package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/sluicemq/sluice/internal/attr"
)

// Scenario is what a run simulates, as a TOML file gives it (Parse).
// docs/simulator.md describes every field.
type Scenario struct {
	// Name names the scenario (default: the file's name without .toml).
	Name        string `toml:"name"`
	Description string `toml:"description"`
	// Seed seeds every random choice of the run (default 1).
	Seed uint64 `toml:"seed"`
	// Duration is the simulated time (required).
	Duration Duration `toml:"duration"`
	// Sample is the interval of the time series (default 1m).
	Sample Duration `toml:"sample"`
	// Queue are the queue's attributes, as SetQueueAttributes takes them
	// (numbers and booleans may be written bare); validated by the
	// server's own rules.
	Queue map[string]string `toml:"-"`
	// Tenants send into the queue, each with its MessageGroupId.
	Tenants   []Tenant  `toml:"tenant"`
	Consumers Consumers `toml:"consumers"`
}

// Tenant is one sender and its arrival process: its rate (messages per
// second) from Start to Stop, evenly spaced ("constant") or at random
// ("poisson"), ramping linearly to RampTo if set, only during the on
// periods of an On/Off cycle if set, and at a burst's rate during each
// burst.
type Tenant struct {
	Name     string   `toml:"name"`
	Arrivals string   `toml:"arrivals"` // "poisson" (default) or "constant"
	Rate     float64  `toml:"rate"`
	RampTo   *float64 `toml:"ramp_to"`
	On       Duration `toml:"on"`
	Off      Duration `toml:"off"`
	Start    Duration `toml:"start"`
	Stop     Duration `toml:"stop"` // default: the end of the run
	Bursts   []Burst  `toml:"burst"`
}

// Burst is a period during which a tenant sends at Rate instead.
type Burst struct {
	At       Duration `toml:"at"`
	Duration Duration `toml:"duration"`
	Rate     float64  `toml:"rate"`
}

// Consumers are the queue's consumers: Count of them, each receiving up
// to Batch messages when it has none in service, serving them for a
// Service time each, failing each with probability Failure (the message
// is not deleted: it comes back after its visibility timeout, through the
// queue's retry ladder and dead-letter queue). At most Concurrency
// messages are in service at once (0: Count × Batch). A consumer that
// receives nothing polls again after IdlePoll. During an outage
// [from, to) no consumer receives; messages in service finish.
type Consumers struct {
	Count       int          `toml:"count"`
	Batch       int          `toml:"batch"`
	Concurrency int          `toml:"concurrency"`
	IdlePoll    Duration     `toml:"idle_poll"`
	Failure     float64      `toml:"failure"`
	Outages     [][]Duration `toml:"outages"`
	Service     Service      `toml:"service"`
}

// Service is the consumers' service time: "fixed" (Time), "exponential"
// (Mean) or "lognormal" (Median and P99).
type Service struct {
	Distribution string   `toml:"distribution"`
	Time         Duration `toml:"time"`
	Mean         Duration `toml:"mean"`
	Median       Duration `toml:"median"`
	P99          Duration `toml:"p99"`
}

// Duration is a duration written as Go writes one ("90s", "1h30m").
type Duration time.Duration

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (like 90s, 5m, 1h30m)", b)
	}
	*d = Duration(v)
	return nil
}

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// The queue the simulation creates, and the account its ARNs name (a
// RedrivePolicy's target is created first, if it is of this account).
const (
	QueueName = "sim"
	Region    = "us-east-1"
	AccountID = "000000000000"
)

// ErrScenario is the cause of every error Parse returns.
var ErrScenario = errors.New("sim: bad scenario")

// Parse decodes and checks a scenario. file names it in errors (and gives
// its default name). Unknown keys are errors; so are queue attributes the
// server would refuse, with the server's own message.
func Parse(file string, data []byte) (*Scenario, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrScenario, file, fmt.Sprintf(format, args...))
	}
	var raw struct {
		Scenario
		Queue map[string]any `toml:"queue"`
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fail("line %d: %s", pe.Position.Line, pe.Message)
		}
		return nil, fail("%s", strings.TrimPrefix(err.Error(), "toml: "))
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fail("unknown key %s (see docs/simulator.md for the format)", strings.Join(keys, ", "))
	}
	sc := raw.Scenario
	sc.Queue = map[string]string{}
	for k, v := range raw.Queue {
		s, ok := attrString(v)
		if !ok {
			return nil, fail("queue.%s: a queue attribute is a string, a number or a boolean, not %T", k, v)
		}
		sc.Queue[k] = s
	}
	if err := sc.check(file); err != nil {
		return nil, fail("%s", err)
	}
	return &sc, nil
}

// attrString writes a TOML value as SetQueueAttributes takes it.
func attrString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// check fills defaults and checks every field, naming the first one
// wrong.
func (sc *Scenario) check(file string) error {
	if sc.Name == "" {
		base := file[strings.LastIndexAny(file, `/\`)+1:]
		sc.Name = strings.TrimSuffix(base, ".toml")
	}
	if sc.Seed == 0 {
		sc.Seed = 1
	}
	if sc.Duration <= 0 {
		return errors.New("duration: required, and more than 0 (like \"2h\")")
	}
	if sc.Duration.D() > 31*24*time.Hour {
		return errors.New("duration: at most 31 days (744h)")
	}
	if sc.Sample == 0 {
		sc.Sample = Duration(time.Minute)
	}
	if sc.Sample < Duration(time.Second) || sc.Sample > sc.Duration {
		return fmt.Errorf("sample: from 1s to the duration (%s), got %s", sc.Duration.D(), sc.Sample.D())
	}
	if err := sc.checkQueue(); err != nil {
		return err
	}
	if len(sc.Tenants) == 0 {
		return errors.New("tenant: at least one [[tenant]] is needed")
	}
	seen := map[string]bool{}
	for i := range sc.Tenants {
		t := &sc.Tenants[i]
		if err := t.check(sc.Duration); err != nil {
			return fmt.Errorf("tenant[%d] (%q): %w", i, t.Name, err)
		}
		if seen[t.Name] {
			return fmt.Errorf("tenant[%d]: name %q: used by another tenant", i, t.Name)
		}
		seen[t.Name] = true
	}
	if err := sc.Consumers.check(); err != nil {
		return fmt.Errorf("consumers.%w", err)
	}
	return nil
}

// checkQueue checks the queue's attributes as CreateQueue does, with the
// server's own error messages.
func (sc *Scenario) checkQueue() error {
	if _, ok := sc.Queue["FifoQueue"]; ok {
		return errors.New("queue.FifoQueue: the simulator runs standard queues only (for now)")
	}
	if _, err := attr.Validate(sc.Queue, false, true); err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	return nil
}

func (t *Tenant) check(run Duration) error {
	if t.Name == "" || len(t.Name) > 128 || strings.ContainsFunc(t.Name, func(r rune) bool { return r < '!' || r > '~' }) {
		return errors.New("name: 1 to 128 printable ASCII characters, no spaces (it is the MessageGroupId)")
	}
	switch t.Arrivals {
	case "":
		t.Arrivals = "poisson"
	case "poisson", "constant":
	default:
		return fmt.Errorf("arrivals: \"poisson\" or \"constant\", got %q", t.Arrivals)
	}
	if err := checkRate("rate", t.Rate); err != nil {
		return err
	}
	if t.RampTo != nil {
		if err := checkRate("ramp_to", *t.RampTo); err != nil {
			return err
		}
	}
	if (t.On == 0) != (t.Off == 0) {
		return errors.New("on, off: give both (the lengths of the on and off periods) or neither")
	}
	if t.On < 0 || t.Off < 0 {
		return errors.New("on, off: must be more than 0")
	}
	if t.Stop == 0 {
		t.Stop = run
	}
	if t.Start < 0 || t.Start >= t.Stop || t.Stop > run {
		return fmt.Errorf("start, stop: 0 <= start < stop <= duration (%s), got %s and %s", run.D(), t.Start.D(), t.Stop.D())
	}
	for j, b := range t.Bursts {
		if b.At < 0 || b.Duration <= 0 {
			return fmt.Errorf("burst[%d]: at >= 0 and duration > 0, got %s and %s", j, b.At.D(), b.Duration.D())
		}
		if err := checkRate(fmt.Sprintf("burst[%d].rate", j), b.Rate); err != nil {
			return err
		}
	}
	bs := append([]Burst(nil), t.Bursts...)
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].At < bs[j].At })
	for j := 1; j < len(bs); j++ {
		if bs[j].At < bs[j-1].At+bs[j-1].Duration {
			return fmt.Errorf("burst: the bursts at %s and %s overlap", bs[j-1].At.D(), bs[j].At.D())
		}
	}
	t.Bursts = bs
	return nil
}

func checkRate(field string, r float64) error {
	if math.IsNaN(r) || r < 0 || r > 1e6 {
		return fmt.Errorf("%s: messages per second, from 0 to 1000000, got %g", field, r)
	}
	return nil
}

func (c *Consumers) check() error {
	if c.Count < 0 || c.Count > 100_000 {
		return fmt.Errorf("count: from 0 to 100000, got %d", c.Count)
	}
	if c.Batch == 0 {
		c.Batch = 1
	}
	if c.Batch < 1 || c.Batch > 10 {
		return fmt.Errorf("batch: from 1 to 10 (MaxNumberOfMessages), got %d", c.Batch)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("concurrency: 0 (no limit beyond count x batch) or more, got %d", c.Concurrency)
	}
	if c.IdlePoll == 0 {
		c.IdlePoll = Duration(time.Second)
	}
	if c.IdlePoll < Duration(time.Millisecond) {
		return fmt.Errorf("idle_poll: at least 1ms, got %s", c.IdlePoll.D())
	}
	if math.IsNaN(c.Failure) || c.Failure < 0 || c.Failure > 1 {
		return fmt.Errorf("failure: a probability from 0 to 1, got %g", c.Failure)
	}
	for i, o := range c.Outages {
		if len(o) != 2 || o[0] < 0 || o[1] <= o[0] {
			return fmt.Errorf("outages[%d]: [from, to] with 0 <= from < to (like [\"10m\", \"1h10m\"])", i)
		}
	}
	return c.Service.check()
}

func (s *Service) check() error {
	set := map[string]bool{"time": s.Time != 0, "mean": s.Mean != 0, "median": s.Median != 0, "p99": s.P99 != 0}
	want := map[string][]string{"fixed": {"time"}, "exponential": {"mean"}, "lognormal": {"median", "p99"}}
	if s.Distribution == "" {
		s.Distribution = "fixed"
	}
	keys, ok := want[s.Distribution]
	if !ok {
		return fmt.Errorf("service.distribution: \"fixed\", \"exponential\" or \"lognormal\", got %q", s.Distribution)
	}
	for _, k := range []string{"time", "mean", "median", "p99"} {
		if set[k] && !containsStr(keys, k) {
			return fmt.Errorf("service.%s: not a parameter of the %s distribution (it takes %s)", k, s.Distribution, strings.Join(keys, " and "))
		}
	}
	for _, d := range []Duration{s.Time, s.Mean, s.Median, s.P99} {
		if d < 0 {
			return errors.New("service: times must not be negative")
		}
	}
	if s.Distribution == "lognormal" && (s.Median <= 0 || s.P99 < s.Median) {
		return fmt.Errorf("service: lognormal needs 0 < median <= p99, got %s and %s", s.Median.D(), s.P99.D())
	}
	if s.Distribution == "exponential" && s.Mean <= 0 {
		return errors.New("service.mean: more than 0")
	}
	return nil
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
