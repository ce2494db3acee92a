package sim

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
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
	// Hurt, when set, counts the tenants whose p99 wait exceeded it (the
	// blast radius of a noisy neighbour).
	Hurt Duration `toml:"hurt"`
	// Windows are ranges of send times the summary reports on: what was
	// sent in each, how long it waited, when the last of it was served.
	Windows []Window `toml:"window"`
	// Variant names the configuration of this run when the file gives
	// several ([[variant]]: see Expand); "" when it gives one.
	Variant string `toml:"-"`
	// Variants are the file's configurations: each changes the queue's
	// attributes and the consumers' fields from the file's. Expand makes
	// one scenario of each.
	Variants []Variant `toml:"-"`
}

// Variant is one configuration of a scenario: queue attributes set over
// the file's [queue], consumers' fields over its [consumers].
type Variant struct {
	Name        string
	Description string
	Queue       map[string]string
	Consumers   Consumers
}

// Tenant is one sender and its arrival process: its rate (messages per
// second) from Start to Stop, evenly spaced ("constant") or at random
// ("poisson"), ramping linearly to RampTo if set, only during the on
// periods of an On/Off cycle if set, and at a burst's rate during each
// burst.
type Tenant struct {
	Name string `toml:"name"`
	// Count makes this entry a class of Count tenants alike, named
	// Name-1 ... Name-Count (zero-padded), each sending at Rate; the
	// summary and the time series show the class as one row.
	Count    int      `toml:"count"`
	Arrivals string   `toml:"arrivals"` // "poisson" (default) or "constant"
	Rate     float64  `toml:"rate"`
	RampTo   *float64 `toml:"ramp_to"`
	On       Duration `toml:"on"`
	Off      Duration `toml:"off"`
	Start    Duration `toml:"start"`
	Stop     Duration `toml:"stop"` // default: the end of the run
	Bursts   []Burst  `toml:"burst"`
}

// Burst is a period during which a tenant sends at Rate instead; with
// Every, one such period every Every from At on (a tenant with a
// repeating burst has no other).
type Burst struct {
	At       Duration `toml:"at"`
	Duration Duration `toml:"duration"`
	Rate     float64  `toml:"rate"`
	Every    Duration `toml:"every"`
}

// Window is a range of send times [From, To) the summary reports on (To:
// default the end of the run, and then the sends at the end count), for the messages of Tenants only if given
// (names of [[tenant]] entries).
type Window struct {
	Name    string   `toml:"name"`
	From    Duration `toml:"from"`
	To      Duration `toml:"to"`
	Tenants []string `toml:"tenants"`
}

// Consumers are the queue's consumers: Count of them, each receiving up
// to Batch messages when it has none in service, serving them for a
// Service time each, failing each with probability Failure (the message
// is not deleted: it comes back after its visibility timeout, through the
// queue's retry ladder and dead-letter queue). At most Concurrency
// messages are in service at once (0: Count × Batch). A consumer that
// receives nothing polls again after IdlePoll. During an outage
// [from, to) no consumer receives; messages in service finish.
//
// A failed message is left to time out (OnFailure "timeout", the
// default), given back with RetryMessage ("retry": up the queue's retry
// ladder, or visible again at once without one) or with
// ChangeMessageVisibility 0 ("release"). With Heartbeat set, a consumer
// extends each message's visibility to the queue's VisibilityTimeout
// every Heartbeat while it serves it. With Bind, consumer i receives
// only from shard i mod Shards (X-Sluice-Shard). During a
// Dependency period, the messages served take its Latency more and fail
// with its Failure probability instead.
type Consumers struct {
	Count       int          `toml:"count"`
	Batch       int          `toml:"batch"`
	Concurrency int          `toml:"concurrency"`
	IdlePoll    Duration     `toml:"idle_poll"`
	Failure     float64      `toml:"failure"`
	OnFailure   string       `toml:"on_failure"`
	Heartbeat   Duration     `toml:"heartbeat"`
	Bind        bool         `toml:"bind"`
	Outages     [][]Duration `toml:"outages"`
	Service     Service      `toml:"service"`
	Dependency  []Dependency `toml:"dependency"`
}

// Dependency is a period [From, To) during which the consumers'
// dependency is slow (Latency is added to each service started in it)
// or failing (Failure, when set, replaces the consumers' failure
// probability), for the messages of Tenants only if given (names of
// [[tenant]] entries).
type Dependency struct {
	From    Duration `toml:"from"`
	To      Duration `toml:"to"`
	Latency Duration `toml:"latency"`
	Failure *float64 `toml:"failure"`
	Tenants []string `toml:"tenants"`
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

// The queue the simulation creates (QueueName, or QueueName.fifo for a
// FIFO queue: Scenario.QueueName), and the account its ARNs name (a
// RedrivePolicy's target is created first, if it is of this account).
const (
	QueueName = "sim"
	Region    = "us-east-1"
	AccountID = "000000000000"
)

// ErrScenario is the cause of every error Parse returns.
var ErrScenario = errors.New("sim: bad scenario")

// fieldError is a field's mistake: path names it ("tenant[1].burst[0].rate"),
// and Parse finds its line.
type fieldError struct {
	path []string
	msg  string
}

func (e *fieldError) Error() string { return strings.Join(e.path, ".") + ": " + e.msg }

// ferr is a mistake in the field path (dotted, with indices).
func ferr(path string, format string, args ...any) error {
	return &fieldError{path: strings.Split(path, "."), msg: fmt.Sprintf(format, args...)}
}

// under puts a field's mistake under its table: under("tenant[1]", err).
func under(table string, err error) error {
	var fe *fieldError
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	return &fieldError{path: append(strings.Split(table, "."), fe.path...), msg: fe.msg}
}

// rawVariant is a [[variant]] as written: its consumers' fields are
// decoded over the file's.
type rawVariant struct {
	Name        string         `toml:"name"`
	Description string         `toml:"description"`
	Queue       map[string]any `toml:"queue"`
	Consumers   toml.Primitive `toml:"consumers"`
}

// Parse decodes and checks a scenario. file names it in errors (and gives
// its default name); an error names the field, and its line when the
// field is written in the file. Unknown keys are errors; so are queue
// attributes the server would refuse, with the server's own message.
func Parse(file string, data []byte) (*Scenario, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrScenario, file, fmt.Sprintf(format, args...))
	}
	var raw struct {
		Scenario
		Queue    map[string]any `toml:"queue"`
		Variants []rawVariant   `toml:"variant"`
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fail("line %d: %s", pe.Position.Line, pe.Message)
		}
		return nil, fail("%s", strings.TrimPrefix(err.Error(), "toml: "))
	}
	sc := raw.Scenario
	var bad error
	sc.Queue, bad = queueAttrs("queue", raw.Queue)
	// The variants' consumers are decoded over the file's, after its
	// defaults are filled (check), so that a variant changes only what it
	// names.
	if bad == nil {
		bad = sc.check(file)
	}
	for i, rv := range raw.Variants {
		v := Variant{Name: rv.Name, Description: rv.Description, Consumers: sc.Consumers.clone()}
		at := fmt.Sprintf("variant[%d]", i)
		if err := md.PrimitiveDecode(rv.Consumers, &v.Consumers); err != nil {
			return nil, fail("%s.consumers: %s", at, strings.TrimPrefix(err.Error(), "toml: "))
		}
		if bad == nil {
			v.Queue, bad = queueAttrs(at+".queue", rv.Queue)
		}
		if bad == nil {
			bad = sc.checkVariant(i, &v)
		}
		sc.Variants = append(sc.Variants, v)
	}
	if und := md.Undecoded(); len(und) > 0 && bad == nil {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		line := ""
		if n := locate(data, strings.Split(und[0].String(), ".")); n > 0 {
			line = fmt.Sprintf("line %d: ", n)
		}
		return nil, fail("%sunknown key %s (see docs/simulator.md for the format)", line, strings.Join(keys, ", "))
	}
	if bad != nil {
		var fe *fieldError
		if errors.As(bad, &fe) {
			if n := locate(data, fe.path); n > 0 {
				return nil, fail("line %d: %s", n, bad)
			}
		}
		return nil, fail("%s", bad)
	}
	return &sc, nil
}

// locate finds the line of the field path (like tenant[1].burst[0].rate
// or consumers.outages[0]) in a TOML file: the line of its key under its
// table's header, or of the table's header when the key is not written
// there; 0 when neither is. It reads headers and keys line by line, as
// scenario files are written (no dotted keys, no inline tables).
func locate(data []byte, path []string) int {
	strip := func(s string) string {
		if i := strings.IndexByte(s, '['); i >= 0 {
			return s[:i]
		}
		return s
	}
	// The table the path names, with indices: ["tenant[1]", "burst[0]"].
	table, key := path[:len(path)-1], strip(path[len(path)-1])
	// The elements of array tables seen so far: [[tenant]] makes
	// tenant[0], tenant[1]...; [[tenant.burst]] an element of the last
	// tenant's bursts, and [variant.queue] a table of the last variant.
	counts := map[string]int{}
	resolve := func(parts []string) []string {
		var out []string
		for _, p := range parts {
			k := strings.Join(append(slices.Clone(out), p), ".")
			if c, ok := counts[k]; ok {
				p = fmt.Sprintf("%s[%d]", p, c-1)
			}
			out = append(out, p)
		}
		return out
	}
	// same compares a table's path with a path of the error's: an element
	// without an index (an unknown key's path has none) matches any.
	same := func(cur, want []string) bool {
		return slices.EqualFunc(cur, want, func(c, w string) bool {
			return c == w || (!strings.Contains(w, "[") && strip(c) == w)
		})
	}
	var cur []string
	headerLine, pathLine := 0, 0
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "[["):
			h, _, ok := strings.Cut(line[2:], "]]")
			if !ok {
				continue
			}
			parts := strings.Split(strings.TrimSpace(h), ".")
			parent := resolve(parts[:len(parts)-1])
			last := parts[len(parts)-1]
			k := strings.Join(append(slices.Clone(parent), last), ".")
			cur = append(parent, fmt.Sprintf("%s[%d]", last, counts[k]))
			counts[k]++
		case strings.HasPrefix(line, "[") && !strings.ContainsAny(line, `"',`):
			h, _, ok := strings.Cut(line[1:], "]")
			if !ok {
				continue
			}
			cur = resolve(strings.Split(strings.TrimSpace(h), "."))
		default:
			k, _, ok := strings.Cut(line, "=")
			if ok && same(cur, table) && strings.Trim(strings.TrimSpace(k), `"'`) == key {
				return n + 1
			}
			continue
		}
		switch {
		case same(cur, path) && pathLine == 0:
			pathLine = n + 1 // the path names a table
		case same(cur, table) && headerLine == 0:
			headerLine = n + 1
		}
	}
	if pathLine > 0 {
		return pathLine
	}
	return headerLine
}

// queueAttrs writes a [queue] table as SetQueueAttributes takes it.
func queueAttrs(table string, m map[string]any) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := attrString(m[k])
		if !ok {
			return nil, ferr(table+"."+k, "a queue attribute is a string, a number or a boolean, not %T", m[k])
		}
		out[k] = s
	}
	return out, nil
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

// Expand is the scenario once per configuration: once per [[variant]]
// (each named by its variant, with its queue attributes and consumers),
// or sc itself when it has none.
func (sc *Scenario) Expand() []*Scenario {
	if len(sc.Variants) == 0 {
		return []*Scenario{sc}
	}
	var out []*Scenario
	for _, v := range sc.Variants {
		c := *sc
		c.Variants = nil
		c.Variant = v.Name
		if v.Description != "" {
			c.Description = v.Description
		}
		c.Queue = maps.Clone(sc.Queue)
		maps.Copy(c.Queue, v.Queue)
		c.Consumers = v.Consumers.clone()
		out = append(out, &c)
	}
	return out
}

// FIFO reports whether the scenario's queue is a FIFO queue.
func (sc *Scenario) FIFO() bool { return sc.Queue["FifoQueue"] == "true" }

// QueueName is the name of the queue the run creates: sim, or sim.fifo.
func (sc *Scenario) QueueName() string {
	if sc.FIFO() {
		return QueueName + ".fifo"
	}
	return QueueName
}

// Title names the run: the scenario, and its variant if any.
func (sc *Scenario) Title() string {
	if sc.Variant == "" {
		return sc.Name
	}
	return sc.Name + "/" + sc.Variant
}

// clone copies c with its own slices, so that decoding over it leaves c
// as it was.
func (c Consumers) clone() Consumers {
	c.Outages = slices.Clone(c.Outages)
	c.Dependency = slices.Clone(c.Dependency)
	for i := range c.Dependency {
		c.Dependency[i].Tenants = slices.Clone(c.Dependency[i].Tenants)
	}
	return c
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
		return ferr("duration", "required, and more than 0 (like \"2h\")")
	}
	if sc.Duration.D() > 31*24*time.Hour {
		return ferr("duration", "at most 31 days (744h)")
	}
	if sc.Sample == 0 {
		sc.Sample = Duration(time.Minute)
	}
	if sc.Sample < Duration(time.Second) || sc.Sample > sc.Duration {
		return ferr("sample", "from 1s to the duration (%s), got %s", sc.Duration.D(), sc.Sample.D())
	}
	if sc.Hurt < 0 {
		return ferr("hurt", "a wait, more than 0")
	}
	if err := checkQueue("queue", sc.Queue); err != nil {
		return err
	}
	if len(sc.Tenants) == 0 {
		return ferr("tenant", "at least one [[tenant]] is needed")
	}
	seen := map[string]bool{}
	members := 0
	for i := range sc.Tenants {
		t := &sc.Tenants[i]
		at := fmt.Sprintf("tenant[%d]", i)
		if err := t.check(sc.Duration); err != nil {
			return under(at, err)
		}
		if seen[t.Name] {
			return ferr(at+".name", "%q is used by another tenant", t.Name)
		}
		seen[t.Name] = true
		members += t.Count
	}
	if err := sc.checkWindows(); err != nil {
		return err
	}
	if members > MaxTenants {
		return ferr("tenant", "at most %d tenants in all (counting each class's count), got %d", MaxTenants, members)
	}
	names := map[string]bool{}
	for _, m := range sc.Members() {
		if names[m] {
			return ferr("tenant", "two tenants are named %q (a class of count N names its tenants NAME-1 to NAME-N)", m)
		}
		names[m] = true
	}
	return under("consumers", sc.Consumers.check(sc))
}

// checkWindows fills the windows' defaults and checks them.
func (sc *Scenario) checkWindows() error {
	for i := range sc.Windows {
		w := &sc.Windows[i]
		at := fmt.Sprintf("window[%d]", i)
		if w.Name == "" {
			return ferr(at+".name", "required: it names the window's row in the summary")
		}
		if slices.ContainsFunc(sc.Windows[:i], func(o Window) bool { return o.Name == w.Name }) {
			return ferr(at+".name", "%q is used by another window", w.Name)
		}
		if w.To == 0 {
			w.To = sc.Duration
		}
		if w.From < 0 || w.From >= w.To || w.To > sc.Duration {
			return ferr(at+".to", "0 <= from < to <= duration (%s), got %s and %s", sc.Duration.D(), w.From.D(), w.To.D())
		}
		for _, n := range w.Tenants {
			if !slices.ContainsFunc(sc.Tenants, func(t Tenant) bool { return t.Name == n }) {
				return ferr(at+".tenants", "%q is not a [[tenant]]'s name", n)
			}
		}
	}
	return nil
}

// MaxTenants bounds the tenants of a run (a class counts its members).
const MaxTenants = 10_000

// Members are the names of every tenant of the run, class by class.
func (sc *Scenario) Members() []string {
	var out []string
	for _, t := range sc.Tenants {
		out = append(out, t.members()...)
	}
	return out
}

// members are the names of the class's tenants: its name alone, or
// Name-1 ... Name-Count zero-padded to the same width.
func (t *Tenant) members() []string {
	if t.Count <= 1 {
		return []string{t.Name}
	}
	w := len(strconv.Itoa(t.Count))
	out := make([]string, t.Count)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%0*d", t.Name, w, i+1)
	}
	return out
}

// checkVariant checks variant i as it runs: its queue attributes over
// the file's, its consumers.
func (sc *Scenario) checkVariant(i int, v *Variant) error {
	at := fmt.Sprintf("variant[%d]", i)
	if v.Name == "" {
		return ferr(at+".name", "required: it names the variant in the summary and the charts")
	}
	for j := range i {
		if sc.Variants[j].Name == v.Name {
			return ferr(at+".name", "%q is used by another variant", v.Name)
		}
	}
	q := maps.Clone(sc.Queue)
	maps.Copy(q, v.Queue)
	if err := checkQueue(at+".queue", q); err != nil {
		return err
	}
	return under(at+".consumers", v.Consumers.check(sc))
}

// checkQueue checks the queue's attributes as CreateQueue does, with the
// server's own error messages.
func checkQueue(table string, q map[string]string) error {
	fifo := false
	switch v, ok := q["FifoQueue"]; {
	case ok && v != "true":
		return ferr(table+".FifoQueue", "true, or leave it out for a standard queue")
	case ok:
		fifo = true
	}
	if _, err := attr.Validate(q, fifo, true); err != nil {
		// Name the attribute: the first that is refused alone.
		for _, k := range slices.Sorted(maps.Keys(q)) {
			if _, e := attr.Validate(map[string]string{k: q[k]}, fifo, true); e != nil {
				return ferr(table+"."+k, "%s", e)
			}
		}
		return ferr(table, "%s", err)
	}
	return nil
}

func (t *Tenant) check(run Duration) error {
	if t.Name == "" || len(t.Name) > 120 || strings.ContainsFunc(t.Name, func(r rune) bool { return r < '!' || r > '~' }) {
		return ferr("name", "1 to 120 printable ASCII characters, no spaces (it is the MessageGroupId)")
	}
	if t.Count == 0 {
		t.Count = 1
	}
	if t.Count < 1 || t.Count > MaxTenants {
		return ferr("count", "from 1 to %d tenants alike, got %d", MaxTenants, t.Count)
	}
	switch t.Arrivals {
	case "":
		t.Arrivals = "poisson"
	case "poisson", "constant":
	default:
		return ferr("arrivals", "\"poisson\" or \"constant\", got %q", t.Arrivals)
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
		return ferr("on", "give on and off (the lengths of the on and off periods) or neither")
	}
	if t.On < 0 || t.Off < 0 {
		return ferr("on", "on and off must be more than 0")
	}
	if t.Stop == 0 {
		t.Stop = run
	}
	if t.Start < 0 || t.Start >= t.Stop || t.Stop > run {
		return ferr("stop", "0 <= start < stop <= duration (%s), got %s and %s", run.D(), t.Start.D(), t.Stop.D())
	}
	for j, b := range t.Bursts {
		if b.At < 0 || b.Duration <= 0 {
			return ferr(fmt.Sprintf("burst[%d].duration", j), "at >= 0 and duration > 0, got %s and %s", b.At.D(), b.Duration.D())
		}
		if err := checkRate(fmt.Sprintf("burst[%d].rate", j), b.Rate); err != nil {
			return err
		}
		if b.Every != 0 && (b.Every <= b.Duration || len(t.Bursts) > 1) {
			return ferr(fmt.Sprintf("burst[%d].every", j), "longer than the burst's duration (%s), and the tenant's only burst; got %s", b.Duration.D(), b.Every.D())
		}
	}
	bs := append([]Burst(nil), t.Bursts...)
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].At < bs[j].At })
	for j := 1; j < len(bs); j++ {
		if bs[j].At < bs[j-1].At+bs[j-1].Duration {
			return ferr("burst", "the bursts at %s and %s overlap", bs[j-1].At.D(), bs[j].At.D())
		}
	}
	t.Bursts = bs
	return nil
}

func checkRate(field string, r float64) error {
	if math.IsNaN(r) || r < 0 || r > 1e6 {
		return ferr(field, "messages per second, from 0 to 1000000, got %g", r)
	}
	return nil
}

func (c *Consumers) check(sc *Scenario) error {
	if c.Count < 0 || c.Count > 100_000 {
		return ferr("count", "from 0 to 100000, got %d", c.Count)
	}
	if c.Batch == 0 {
		c.Batch = 1
	}
	if c.Batch < 1 || c.Batch > 10 {
		return ferr("batch", "from 1 to 10 (MaxNumberOfMessages), got %d", c.Batch)
	}
	if c.Concurrency < 0 {
		return ferr("concurrency", "0 (no limit beyond count x batch) or more, got %d", c.Concurrency)
	}
	if c.IdlePoll == 0 {
		c.IdlePoll = Duration(time.Second)
	}
	if c.IdlePoll < Duration(time.Millisecond) {
		return ferr("idle_poll", "at least 1ms, got %s", c.IdlePoll.D())
	}
	if math.IsNaN(c.Failure) || c.Failure < 0 || c.Failure > 1 {
		return ferr("failure", "a probability from 0 to 1, got %g", c.Failure)
	}
	switch c.OnFailure {
	case "":
		c.OnFailure = "timeout"
	case "timeout", "retry", "release":
	default:
		return ferr("on_failure", "\"timeout\" (left to time out), \"retry\" (RetryMessage) or \"release\" (ChangeMessageVisibility 0), got %q", c.OnFailure)
	}
	if c.Heartbeat < 0 || (c.Heartbeat > 0 && c.Heartbeat < Duration(time.Second)) {
		return ferr("heartbeat", "at least 1s (or 0: no heartbeats), got %s", c.Heartbeat.D())
	}
	for i, o := range c.Outages {
		if len(o) != 2 || o[0] < 0 || o[1] <= o[0] {
			return ferr(fmt.Sprintf("outages[%d]", i), "[from, to] with 0 <= from < to (like [\"10m\", \"1h10m\"])")
		}
	}
	for i, d := range c.Dependency {
		at := fmt.Sprintf("dependency[%d]", i)
		if d.From < 0 || d.To <= d.From {
			return ferr(at+".to", "0 <= from < to, got %s and %s", d.From.D(), d.To.D())
		}
		if d.Latency < 0 {
			return ferr(at+".latency", "must not be negative, got %s", d.Latency.D())
		}
		if d.Failure != nil && (math.IsNaN(*d.Failure) || *d.Failure < 0 || *d.Failure > 1) {
			return ferr(at+".failure", "a probability from 0 to 1, got %g", *d.Failure)
		}
		for _, n := range d.Tenants {
			if !slices.ContainsFunc(sc.Tenants, func(t Tenant) bool { return t.Name == n }) {
				return ferr(at+".tenants", "%q is not a [[tenant]]'s name", n)
			}
		}
	}
	return under("service", c.Service.check())
}

func (s *Service) check() error {
	set := map[string]bool{"time": s.Time != 0, "mean": s.Mean != 0, "median": s.Median != 0, "p99": s.P99 != 0}
	want := map[string][]string{"fixed": {"time"}, "exponential": {"mean"}, "lognormal": {"median", "p99"}}
	if s.Distribution == "" {
		s.Distribution = "fixed"
	}
	keys, ok := want[s.Distribution]
	if !ok {
		return ferr("distribution", "\"fixed\", \"exponential\" or \"lognormal\", got %q", s.Distribution)
	}
	for _, k := range []string{"time", "mean", "median", "p99"} {
		if set[k] && !slices.Contains(keys, k) {
			return ferr(k, "not a parameter of the %s distribution (it takes %s)", s.Distribution, strings.Join(keys, " and "))
		}
	}
	for _, k := range []string{"time", "mean", "median", "p99"} {
		if d := map[string]Duration{"time": s.Time, "mean": s.Mean, "median": s.Median, "p99": s.P99}[k]; d < 0 {
			return ferr(k, "must not be negative")
		}
	}
	if s.Distribution == "lognormal" && (s.Median <= 0 || s.P99 < s.Median) {
		return ferr("p99", "lognormal needs 0 < median <= p99, got %s and %s", s.Median.D(), s.P99.D())
	}
	if s.Distribution == "exponential" && s.Mean <= 0 {
		return ferr("mean", "more than 0")
	}
	return nil
}
