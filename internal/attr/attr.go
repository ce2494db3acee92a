// Package attr owns queue attributes: which exist, their ranges and
// defaults, their validation, and their parsing, once, into the typed
// configuration the engine and the queue core run on (Parse). Nothing
// here parses an attribute on a hot path.
package attr

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/sched"
	st "github.com/sluicemq/sluice/sluicetype"
)

// spec describes one settable queue attribute.
type spec struct {
	def      string // rendered when not set ("" = hidden when not set)
	min, max int    // integer range when isInt
	isInt    bool
	fifoOnly bool
	check    func(v string) error
}

var specs = map[string]spec{
	"VisibilityTimeout":             {def: "30", isInt: true, min: 0, max: 43200},
	"MaximumMessageSize":            {def: "1048576", isInt: true, min: 1024, max: 1048576},
	"MessageRetentionPeriod":        {def: "345600", isInt: true, min: 60, max: 1209600},
	"DelaySeconds":                  {def: "0", isInt: true, min: 0, max: 900},
	"ReceiveMessageWaitTimeSeconds": {def: "0", isInt: true, min: 0, max: 20},
	"RedrivePolicy":                 {},
	"RedriveAllowPolicy":            {},
	"Policy":                        {check: checkJSON},
	"KmsMasterKeyId":                {},
	"KmsDataKeyReusePeriodSeconds":  {isInt: true, min: 60, max: 86400},
	"SqsManagedSseEnabled":          {def: "true", check: checkBool},
	"FifoQueue":                     {fifoOnly: true, check: checkBool},
	"ContentBasedDeduplication":     {def: "false", fifoOnly: true, check: checkBool},
	"DeduplicationScope":            {def: "queue", fifoOnly: true, check: oneOf("messageGroup", "queue")},
	"FifoThroughputLimit":           {def: "perQueue", fifoOnly: true, check: oneOf("perQueue", "perMessageGroupId")},

	// Sluice's anti-backlog attributes (docs/anti-backlog.md). Hidden when
	// not set, so "All" answers as SQS does for a plain queue.
	"TenantKey":             {check: checkTenantKey},
	"FairDelivery":          {check: checkBool},
	"TenantMaxInFlight":     {isInt: true, min: 0, max: queue.MaxInFlight},
	"TenantSendRate":        {check: checkRate},
	"TenantSendBurst":       {check: checkRate},
	"TenantSendRateGrowth":  {check: checkFloat(0, 10)},
	"TenantSendRateCeiling": {check: checkRate},
	"TenantReceiveRate":     {check: checkRate},
	"TenantReceiveBurst":    {check: checkRate},
	"TenantBacklogTarget":   {isInt: true, min: 0, max: 1 << 30},
	"SidelineAgeSeconds":    {isInt: true, min: 0, max: 1209600},
	"OldestFirst":           {check: checkBool},
	"MaxMessageAgeSeconds":  {isInt: true, min: 0, max: 1209600},
	"ExpiredMessageAction":  {check: oneOf("Drop", "DeadLetter")},
	"Shards":                {isInt: true, min: 1, max: 256},
	"ShardsPerTenant":       {isInt: true, min: 1, max: 256},
	"LowerLaneShare":        {check: checkFloat(0.01, 0.5)},
	"TenantHeadroom":        {isInt: true, min: 0, max: 1000},
	"RetryDelays":           {check: checkRetryDelays},
	"FlowControl":           {check: checkBool},
}

// FormerNames are the earlier names of attributes that were renamed:
// still accepted when set and answered when asked for by name (the
// current name is the one All answers with). A queue's settings written
// under a former name read as the current one.
var FormerNames = map[string]string{"Partitions": "Shards", "PartitionsPerTenant": "ShardsPerTenant"}

// current is the current name of attribute name.
func current(name string) string {
	if c, ok := FormerNames[name]; ok {
		return c
	}
	return name
}

// ReadOnly are the computed attributes SQS answers (with All too).
var ReadOnly = []string{
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
	"CreatedTimestamp", "LastModifiedTimestamp", "QueueArn",
}

// SluiceReadOnly are Sluice's computed attributes, answered when asked for
// by name (not with All, so All answers as SQS does).
var SluiceReadOnly = []string{
	"ApproximateAgeOfOldestMessage", "ApproximateNumberOfTenants", "ApproximateNumberOfNoisyGroups",
	"ApproximateAgeOfOldestMessageInQuietGroups", "ApproximateNumberOfMessagesSidelined", "ApproximateNumberOfMessagesDropped",
}

// Known reports whether name is an attribute GetQueueAttributes answers.
func Known(name string) bool {
	_, ok := specs[current(name)]
	return ok || slices.Contains(ReadOnly, name) || slices.Contains(SluiceReadOnly, name)
}

// Selection is what a GetQueueAttributes asks for: names, or All (every
// attribute SQS has; Sluice's own are answered by name only).
type Selection struct {
	all   bool
	names map[string]bool
}

// Select checks the names asked for.
func Select(names []string) (Selection, error) {
	s := Selection{names: map[string]bool{}}
	for _, n := range names {
		switch {
		case n == "All":
			s.all = true
		case !Known(n):
			return Selection{}, st.Errorf(st.CodeInvalidAttributeName, "Unknown Attribute %s.", n)
		default:
			s.names[n] = true
		}
	}
	return s, nil
}

// Has reports whether attribute n is asked for.
func (s Selection) Has(n string) bool {
	return s.names[n] || s.all && !slices.Contains(SluiceReadOnly, n)
}

// AnySluice reports whether one of Sluice's computed attributes is asked
// for (they cost a look at every tenant).
func (s Selection) AnySluice() bool { return slices.ContainsFunc(SluiceReadOnly, s.Has) }

// Keep leaves in m only the attributes asked for (answering one asked for
// by a former name under that name), and returns it.
func (s Selection) Keep(m map[string]string) map[string]string {
	for former, cur := range FormerNames {
		if v, ok := m[cur]; ok && s.names[former] {
			m[former] = v
		}
	}
	maps.DeleteFunc(m, func(n, _ string) bool { return !s.Has(n) })
	return m
}

// ParseRetryDelays parses RetryDelays: 1 to 10 comma-separated durations
// ("1s,10s,1m,10m"), each at most 12 hours.
func ParseRetryDelays(v string) ([]time.Duration, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > 10 {
		return nil, fmt.Errorf("at most 10 retry levels")
	}
	out := make([]time.Duration, len(parts))
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d < 0 || d > 12*time.Hour {
			return nil, fmt.Errorf("level %d: %q is not a duration from 0s to 12h (like 1s,10s,1m,10m)", i+1, p)
		}
		out[i] = d
	}
	return out, nil
}

func checkRetryDelays(v string) error {
	_, err := ParseRetryDelays(v)
	return err
}

func checkTenantKey(v string) error {
	if v == "MessageGroupId" || v == "Principal" {
		return nil
	}
	if name, ok := strings.CutPrefix(v, "MessageAttribute:"); ok && name != "" && len(name) <= 256 {
		return nil
	}
	return fmt.Errorf("must be MessageGroupId, Principal or MessageAttribute:<name>")
}

func checkFloat(lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f != f || f < lo || f > hi {
			return fmt.Errorf("must be a number from %g to %g", lo, hi)
		}
		return nil
	}
}

var checkRate = checkFloat(0, 1e6)

func checkBool(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("must be true or false")
	}
	return nil
}

func checkJSON(v string) error {
	if v == "" {
		return nil
	}
	if !json.Valid([]byte(v)) {
		return fmt.Errorf("the policy is not valid JSON")
	}
	return nil
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, x := range vals {
			if v == x {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

// InvalidValue is the SQS error for a bad attribute value.
func InvalidValue(name, reason string) error {
	if reason == "" {
		return st.Errorf(st.CodeInvalidAttributeValue, "Invalid value for the parameter %s.", name)
	}
	return st.Errorf(st.CodeInvalidAttributeValue, "Invalid value for the parameter %s. Reason: %s.", name, strings.TrimSuffix(reason, "."))
}

// RedrivePolicy is the parsed RedrivePolicy.
type RedrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     int    `json:"maxReceiveCount"`
}

// ParseRedrivePolicy parses and checks a RedrivePolicy value.
func ParseRedrivePolicy(v string) (RedrivePolicy, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return RedrivePolicy{}, InvalidValue("RedrivePolicy", "Redrive policy is not a valid JSON map")
	}
	var p RedrivePolicy
	arn, _ := raw["deadLetterTargetArn"].(string)
	if arn == "" {
		return p, InvalidValue("RedrivePolicy", "Redrive policy does not contain mandatory attribute: deadLetterTargetArn")
	}
	p.DeadLetterTargetArn = arn
	switch c := raw["maxReceiveCount"].(type) {
	case float64:
		p.MaxReceiveCount = int(c)
		if float64(p.MaxReceiveCount) != c {
			p.MaxReceiveCount = 0
		}
	case string:
		n, err := strconv.Atoi(c)
		if err == nil {
			p.MaxReceiveCount = n
		}
	case nil:
		return p, InvalidValue("RedrivePolicy", "Redrive policy does not contain mandatory attribute: maxReceiveCount")
	}
	if p.MaxReceiveCount < 1 || p.MaxReceiveCount > 1000 {
		return p, InvalidValue("RedrivePolicy", "Invalid value for maxReceiveCount: "+fmt.Sprint(raw["maxReceiveCount"])+", valid values are from 1 to 1000 both inclusive")
	}
	for k := range raw {
		if k != "deadLetterTargetArn" && k != "maxReceiveCount" {
			return p, InvalidValue("RedrivePolicy", "Only following attributes are supported: [deadLetterTargetArn, maxReceiveCount]")
		}
	}
	return p, nil
}

// RedriveAllowPolicy is the parsed RedriveAllowPolicy.
type RedriveAllowPolicy struct {
	RedrivePermission string   `json:"redrivePermission"`
	SourceQueueArns   []string `json:"sourceQueueArns,omitempty"`
}

// Allows reports whether a source queue may use the queue as its DLQ.
func (p RedriveAllowPolicy) Allows(sourceArn string) bool {
	switch p.RedrivePermission {
	case "denyAll":
		return false
	case "byQueue":
		for _, a := range p.SourceQueueArns {
			if a == sourceArn {
				return true
			}
		}
		return false
	}
	return true
}

// ParseRedriveAllowPolicy parses and checks a RedriveAllowPolicy value.
func ParseRedriveAllowPolicy(v string) (RedriveAllowPolicy, error) {
	var p RedriveAllowPolicy
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return p, InvalidValue("RedriveAllowPolicy", "Redrive allow policy is not a valid JSON map")
	}
	switch p.RedrivePermission {
	case "allowAll", "denyAll":
		if len(p.SourceQueueArns) > 0 {
			return p, InvalidValue("RedriveAllowPolicy", "Only byQueue permission can have sourceQueueArns")
		}
	case "byQueue":
		if len(p.SourceQueueArns) == 0 || len(p.SourceQueueArns) > 10 {
			return p, InvalidValue("RedriveAllowPolicy", "sourceQueueArns must hold 1 to 10 queue ARNs with byQueue")
		}
	default:
		return p, InvalidValue("RedriveAllowPolicy", "redrivePermission must be allowAll, denyAll or byQueue")
	}
	return p, nil
}

// Validate checks attribute names and values for a queue of the given type
// and returns them normalised. creating says whether FifoQueue may be
// given.
func Validate(in map[string]string, fifo, creating bool) (map[string]string, error) {
	out := make(map[string]string, len(in))
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, given := range names {
		v, name := in[given], current(given)
		if name != given {
			if w, both := in[name]; both && w != v {
				return nil, InvalidValue(name, given+" (its former name) is given too, with another value")
			}
		}
		sp, ok := specs[name]
		if !ok {
			return nil, st.Errorf(st.CodeInvalidAttributeName, "Unknown Attribute %s.", given)
		}
		if sp.fifoOnly && !fifo {
			switch name {
			case "DeduplicationScope", "FifoThroughputLimit":
				return nil, st.Errorf(st.CodeInvalidAttributeName, "You can specify the %s only when FifoQueue is set to true.", name)
			default:
				if name == "FifoQueue" && v == "false" && creating {
					continue
				}
				if name == "FifoQueue" && !creating {
					return nil, InvalidValue("FifoQueue", "Modifying queue type is not supported")
				}
				return nil, st.Errorf(st.CodeInvalidAttributeName, "Unknown Attribute %s.", name)
			}
		}
		if name == "FifoQueue" && !creating {
			return nil, InvalidValue("FifoQueue", "Modifying queue type is not supported")
		}
		if sp.isInt {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < sp.min || n > sp.max {
				return nil, InvalidValue(given, "")
			}
			v = strconv.Itoa(n)
		}
		if sp.check != nil {
			if err := sp.check(v); err != nil {
				return nil, InvalidValue(given, "")
			}
		}
		switch name {
		case "RedrivePolicy":
			if v != "" {
				p, err := ParseRedrivePolicy(v)
				if err != nil {
					return nil, err
				}
				b, _ := json.Marshal(p)
				v = string(b)
			}
		case "RedriveAllowPolicy":
			if v != "" {
				p, err := ParseRedriveAllowPolicy(v)
				if err != nil {
					return nil, err
				}
				b, _ := json.Marshal(p)
				v = string(b)
			}
		}
		out[name] = v
	}
	if out["FifoThroughputLimit"] == "perMessageGroupId" && out["DeduplicationScope"] == "queue" {
		return nil, InvalidValue("FifoThroughputLimit", "perMessageGroupId is only valid when DeduplicationScope is messageGroup")
	}
	if out["KmsMasterKeyId"] != "" && out["SqsManagedSseEnabled"] == "true" {
		return nil, InvalidValue("SqsManagedSseEnabled", "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE")
	}
	return out, nil
}

// Effective returns an attribute's value or its default (a value set
// under a former name is the attribute's).
func Effective(set map[string]string, name string) string {
	if v, ok := set[name]; ok && v != "" {
		return v
	}
	for former, cur := range FormerNames {
		if v := set[former]; cur == name && v != "" {
			return v
		}
	}
	return specs[name].def
}

func effInt(set map[string]string, name string) int {
	n, _ := strconv.Atoi(Effective(set, name))
	return n
}

func effFloat(set map[string]string, name string) float64 {
	f, _ := strconv.ParseFloat(set[name], 64)
	return f
}

// Apply merges validated changes into a queue's attributes (an empty value
// clears one).
func Apply(attrs, changes map[string]string) {
	for former, cur := range FormerNames { // a value set under its former name is replaced or cleared with it
		if _, ok := changes[cur]; ok {
			delete(attrs, former)
		}
	}
	for k, v := range changes {
		if v == "" || (k == "KmsDataKeyReusePeriodSeconds" && v == "300") {
			delete(attrs, k)
			continue
		}
		attrs[k] = v
	}
	if attrs["KmsMasterKeyId"] != "" {
		if _, set := changes["SqsManagedSseEnabled"]; !set {
			delete(attrs, "SqsManagedSseEnabled")
		}
	}
}

// Render returns the settable attributes of a queue as SQS answers them
// (set values, else defaults; hidden ones left out).
func Render(meta *record.QueueMeta) map[string]string {
	out := map[string]string{}
	for n, sp := range specs {
		if sp.fifoOnly && !meta.FIFO {
			continue
		}
		v := Effective(meta.Attrs, n)
		if n == "FifoQueue" {
			v = "true"
		}
		if n == "SqsManagedSseEnabled" && meta.Attrs["KmsMasterKeyId"] != "" {
			v = "false"
		}
		if v != "" {
			out[n] = v
		}
	}
	return out
}

// TenantKeyKind says where a message's tenant comes from.
type TenantKeyKind uint8

const (
	TenantFromGroup     TenantKeyKind = iota // MessageGroupId (the default)
	TenantFromPrincipal                      // the sending principal
	TenantFromAttribute                      // a message attribute's string value
)

// Config is a queue's settings, parsed once when they are set.
type Config struct {
	Queue              queue.Config
	MaxMessageSize     int
	ReceiveWait        time.Duration
	Shards             int
	TenantKey          TenantKeyKind
	TenantAttribute    string // TenantFromAttribute: its name
	DeadLetterTarget   string // the dead-letter queue's ARN ("" when none)
	RedriveAllowPolicy *RedriveAllowPolicy
	// FlowControl holds sends back while consumers take messages off a
	// backlog (internal/partition/flow); on unless FlowControl=false.
	FlowControl bool
}

// Parse derives a queue's configuration from its metadata (attributes
// already validated).
func Parse(meta *record.QueueMeta) Config {
	set, fifo := meta.Attrs, meta.FIFO
	c := Config{
		MaxMessageSize: effInt(set, "MaximumMessageSize"),
		ReceiveWait:    time.Duration(effInt(set, "ReceiveMessageWaitTimeSeconds")) * time.Second,
		Shards:         max(1, effInt(set, "Shards")),
		FlowControl:    set["FlowControl"] != "false",
	}
	switch k := set["TenantKey"]; {
	case k == "Principal":
		c.TenantKey = TenantFromPrincipal
	case strings.HasPrefix(k, "MessageAttribute:"):
		c.TenantKey, c.TenantAttribute = TenantFromAttribute, strings.TrimPrefix(k, "MessageAttribute:")
	}
	q := queue.Config{
		FIFO:              fifo,
		VisibilityTimeout: time.Duration(effInt(set, "VisibilityTimeout")) * time.Second,
		Delay:             time.Duration(effInt(set, "DelaySeconds")) * time.Second,
		Retention:         time.Duration(effInt(set, "MessageRetentionPeriod")) * time.Second,
		ContentDedup:      Effective(set, "ContentBasedDeduplication") == "true",
		DedupPerGroup:     Effective(set, "DeduplicationScope") == "messageGroup",
	}
	if rp := set["RedrivePolicy"]; rp != "" {
		if p, err := ParseRedrivePolicy(rp); err == nil {
			q.MaxReceiveCount = p.MaxReceiveCount
			c.DeadLetterTarget = p.DeadLetterTargetArn
		}
	}
	if ap := set["RedriveAllowPolicy"]; ap != "" {
		if p, err := ParseRedriveAllowPolicy(ap); err == nil {
			c.RedriveAllowPolicy = &p
		}
	}
	q.RetryDelays, _ = ParseRetryDelays(set["RetryDelays"])
	q.MaxAge = time.Duration(effInt(set, "MaxMessageAgeSeconds")) * time.Second
	q.AgeToDLQ = set["ExpiredMessageAction"] == "DeadLetter"
	q.Sched = sched.Config{
		Fair:            set["FairDelivery"] != "false",
		Shards:          effInt(set, "Shards"),
		ShardsPerTenant: effInt(set, "ShardsPerTenant"),
		SidelineAge:     int64(effInt(set, "SidelineAgeSeconds")) * 1000,
		// The backlog mode is the default (a FIFO queue's by group): a
		// fixed SidelineAgeSeconds replaces it, OldestFirst turns it off.
		Adaptive:       effInt(set, "SidelineAgeSeconds") == 0 && set["OldestFirst"] != "true",
		RetryLevels:    len(q.RetryDelays),
		LowerLaneShare: effFloat(set, "LowerLaneShare"),
		Headroom:       effInt(set, "TenantHeadroom"),
		Limits: sched.Limits{
			MaxInFlight:     effInt(set, "TenantMaxInFlight"),
			SendRate:        effFloat(set, "TenantSendRate"),
			SendBurst:       effFloat(set, "TenantSendBurst"),
			SendRateGrowth:  effFloat(set, "TenantSendRateGrowth"),
			SendRateCeiling: effFloat(set, "TenantSendRateCeiling"),
			ReceiveRate:     effFloat(set, "TenantReceiveRate"),
			ReceiveBurst:    effFloat(set, "TenantReceiveBurst"),
			BacklogTarget:   effInt(set, "TenantBacklogTarget"),
		},
	}
	if len(meta.Tenants) > 0 {
		q.Sched.Overrides = make(map[string]sched.Limits, len(meta.Tenants))
		for name, l := range meta.Tenants {
			q.Sched.Overrides[name] = sched.Limits{Weight: l.Weight, MaxInFlight: l.MaxInFlight, SendRate: l.SendRate, SendBurst: l.SendBurst,
				ReceiveRate: l.ReceiveRate, ReceiveBurst: l.ReceiveBurst, BacklogTarget: l.BacklogTarget}
		}
	}
	c.Queue = q
	return c
}

// Tenant derives a message's tenant key as the configuration says: its
// MessageGroupId (the default), the sending principal, or the string value
// of a message attribute. A message without one is tenant "".
func (c *Config) Tenant(e *st.SendInput) string {
	switch c.TenantKey {
	case TenantFromPrincipal:
		return e.SenderID
	case TenantFromAttribute:
		a, ok := e.Attributes[c.TenantAttribute]
		if !ok || a.StringValue == nil {
			return ""
		}
		return *a.StringValue
	}
	return e.GroupID
}
