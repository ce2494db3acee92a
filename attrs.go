package sluice

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/sched"
	st "github.com/sluicemq/sluice/sluicetype"
)

// attrSpec describes one settable queue attribute.
type attrSpec struct {
	def      string // rendered when not set ("" = hidden when not set)
	min, max int    // integer range when isInt
	isInt    bool
	fifoOnly bool
	check    func(v string) error
}

var attrSpecs = map[string]attrSpec{
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
	"MaxMessageAgeSeconds":  {isInt: true, min: 0, max: 1209600},
	"ExpiredMessageAction":  {check: oneOf("Drop", "DeadLetter")},
	"Partitions":            {isInt: true, min: 1, max: 256},
	"PartitionsPerTenant":   {isInt: true, min: 1, max: 256},
	"LowerLaneShare":        {check: checkFloat(0.01, 0.5)},
	"TenantHeadroom":        {isInt: true, min: 0, max: 1000},
	"RetryDelays":           {check: checkRetryDelays},
}

// parseRetryDelays parses RetryDelays: 1 to 10 comma-separated durations
// ("1s,10s,1m,10m"), each at most 12 hours.
func parseRetryDelays(v string) ([]time.Duration, error) {
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
	_, err := parseRetryDelays(v)
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

func effFloat(set map[string]string, name string) float64 {
	f, _ := strconv.ParseFloat(set[name], 64)
	return f
}

// readOnlyAttrs are computed; they may be read, never set.
var readOnlyAttrs = []string{
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
	"CreatedTimestamp", "LastModifiedTimestamp", "QueueArn",
}

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

func invalidAttrValue(name, reason string) error {
	if reason == "" {
		return st.Errorf(st.CodeInvalidAttributeValue, "Invalid value for the parameter %s.", name)
	}
	return st.Errorf(st.CodeInvalidAttributeValue, "Invalid value for the parameter %s. Reason: %s.", name, strings.TrimSuffix(reason, "."))
}

// redrivePolicy is the parsed RedrivePolicy.
type redrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     int    `json:"maxReceiveCount"`
}

func parseRedrivePolicy(v string) (redrivePolicy, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		return redrivePolicy{}, invalidAttrValue("RedrivePolicy", "Redrive policy is not a valid JSON map")
	}
	var p redrivePolicy
	arn, _ := raw["deadLetterTargetArn"].(string)
	if arn == "" {
		return p, invalidAttrValue("RedrivePolicy", "Redrive policy does not contain mandatory attribute: deadLetterTargetArn")
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
		return p, invalidAttrValue("RedrivePolicy", "Redrive policy does not contain mandatory attribute: maxReceiveCount")
	}
	if p.MaxReceiveCount < 1 || p.MaxReceiveCount > 1000 {
		return p, invalidAttrValue("RedrivePolicy", "Invalid value for maxReceiveCount: "+fmt.Sprint(raw["maxReceiveCount"])+", valid values are from 1 to 1000 both inclusive")
	}
	for k := range raw {
		if k != "deadLetterTargetArn" && k != "maxReceiveCount" {
			return p, invalidAttrValue("RedrivePolicy", "Only following attributes are supported: [deadLetterTargetArn, maxReceiveCount]")
		}
	}
	return p, nil
}

type redriveAllowPolicy struct {
	RedrivePermission string   `json:"redrivePermission"`
	SourceQueueArns   []string `json:"sourceQueueArns,omitempty"`
}

// allows reports whether a source queue may use the queue as its DLQ.
func (p redriveAllowPolicy) allows(sourceArn string) bool {
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

func parseRedriveAllowPolicy(v string) (redriveAllowPolicy, error) {
	var p redriveAllowPolicy
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return p, invalidAttrValue("RedriveAllowPolicy", "Redrive allow policy is not a valid JSON map")
	}
	switch p.RedrivePermission {
	case "allowAll", "denyAll":
		if len(p.SourceQueueArns) > 0 {
			return p, invalidAttrValue("RedriveAllowPolicy", "Only byQueue permission can have sourceQueueArns")
		}
	case "byQueue":
		if len(p.SourceQueueArns) == 0 || len(p.SourceQueueArns) > 10 {
			return p, invalidAttrValue("RedriveAllowPolicy", "sourceQueueArns must hold 1 to 10 queue ARNs with byQueue")
		}
	default:
		return p, invalidAttrValue("RedriveAllowPolicy", "redrivePermission must be allowAll, denyAll or byQueue")
	}
	return p, nil
}

// validateAttrs checks attribute names and values for a queue of the given
// type and returns them normalised. creating says whether FifoQueue may be
// given.
func validateAttrs(in map[string]string, fifo, creating bool) (map[string]string, error) {
	out := make(map[string]string, len(in))
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		v := in[name]
		spec, ok := attrSpecs[name]
		if !ok {
			return nil, st.Errorf(st.CodeInvalidAttributeName, "Unknown Attribute %s.", name)
		}
		if spec.fifoOnly && !fifo {
			switch name {
			case "DeduplicationScope", "FifoThroughputLimit":
				return nil, st.Errorf(st.CodeInvalidAttributeName, "You can specify the %s only when FifoQueue is set to true.", name)
			default:
				if name == "FifoQueue" && v == "false" && creating {
					continue
				}
				if name == "FifoQueue" && !creating {
					return nil, invalidAttrValue("FifoQueue", "Modifying queue type is not supported")
				}
				return nil, st.Errorf(st.CodeInvalidAttributeName, "Unknown Attribute %s.", name)
			}
		}
		if name == "FifoQueue" && !creating {
			return nil, invalidAttrValue("FifoQueue", "Modifying queue type is not supported")
		}
		if spec.isInt {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < spec.min || n > spec.max {
				return nil, invalidAttrValue(name, "")
			}
			v = strconv.Itoa(n)
		}
		if spec.check != nil {
			if err := spec.check(v); err != nil {
				return nil, invalidAttrValue(name, "")
			}
		}
		switch name {
		case "RedrivePolicy":
			if v != "" {
				p, err := parseRedrivePolicy(v)
				if err != nil {
					return nil, err
				}
				b, _ := json.Marshal(p)
				v = string(b)
			}
		case "RedriveAllowPolicy":
			if v != "" {
				p, err := parseRedriveAllowPolicy(v)
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
		return nil, invalidAttrValue("FifoThroughputLimit", "perMessageGroupId is only valid when DeduplicationScope is messageGroup")
	}
	if out["KmsMasterKeyId"] != "" && out["SqsManagedSseEnabled"] == "true" {
		return nil, invalidAttrValue("SqsManagedSseEnabled", "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE")
	}
	return out, nil
}

// effective returns an attribute's value or its default.
func effective(set map[string]string, name string) string {
	if v, ok := set[name]; ok && v != "" {
		return v
	}
	return attrSpecs[name].def
}

func effInt(set map[string]string, name string) int {
	n, _ := strconv.Atoi(effective(set, name))
	return n
}

// queueConfig derives the state machine's configuration from a queue's
// attributes and per-tenant overrides.
func queueConfig(meta queueMeta) queue.Config {
	set, fifo := meta.Attrs, meta.FIFO
	c := queue.Config{
		FIFO:              fifo,
		VisibilityTimeout: time.Duration(effInt(set, "VisibilityTimeout")) * time.Second,
		Delay:             time.Duration(effInt(set, "DelaySeconds")) * time.Second,
		Retention:         time.Duration(effInt(set, "MessageRetentionPeriod")) * time.Second,
		ContentDedup:      effective(set, "ContentBasedDeduplication") == "true",
		DedupPerGroup:     effective(set, "DeduplicationScope") == "messageGroup",
	}
	if rp := set["RedrivePolicy"]; rp != "" {
		if p, err := parseRedrivePolicy(rp); err == nil {
			c.MaxReceiveCount = p.MaxReceiveCount
		}
	}
	c.RetryDelays, _ = parseRetryDelays(set["RetryDelays"])
	c.MaxAge = time.Duration(effInt(set, "MaxMessageAgeSeconds")) * time.Second
	c.AgeToDLQ = set["ExpiredMessageAction"] == "DeadLetter"
	c.Sched = sched.Config{
		Fair:                set["FairDelivery"] != "false",
		Partitions:          effInt(set, "Partitions"),
		PartitionsPerTenant: effInt(set, "PartitionsPerTenant"),
		SidelineAge:         int64(effInt(set, "SidelineAgeSeconds")) * 1000,
		RetryLevels:         len(c.RetryDelays),
		LowerLaneShare:      effFloat(set, "LowerLaneShare"),
		Headroom:            effInt(set, "TenantHeadroom"),
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
		Overrides: meta.Tenants,
	}
	return c
}

// renderAttrs renders the requested attributes ("All" for all).
func (b *broker) renderAttrs(qs *queueState, names []string) (map[string]string, error) {
	want := map[string]bool{}
	all := false
	for _, n := range names {
		if n == "All" {
			all = true
			continue
		}
		if _, ok := attrSpecs[n]; ok {
			want[n] = true
			continue
		}
		known := false
		for _, r := range append(readOnlyAttrs, sluiceReadOnlyAttrs...) {
			if r == n {
				known = true
			}
		}
		if !known {
			return nil, st.Errorf(st.CodeInvalidAttributeName, "Unknown Attribute %s.", n)
		}
		want[n] = true
	}
	now := b.clock.Now()
	out := map[string]string{}
	qs.mu.Lock()
	counts := qs.q.Counts(now)
	meta := qs.meta
	var figures map[string]string
	for _, n := range sluiceReadOnlyAttrs {
		if want[n] {
			figures = tenantFigures(qs.q, now)
			break
		}
	}
	b.afterAdvanceLocked(qs) // retention may have dropped some
	put := func(n, v string) {
		if all || want[n] {
			out[n] = v
		}
	}
	for n, spec := range attrSpecs {
		if spec.fifoOnly && !meta.FIFO {
			continue
		}
		v, ok := meta.Attrs[n]
		if !ok || v == "" {
			v = spec.def
		}
		if n == "FifoQueue" {
			v = "true"
		}
		if n == "SqsManagedSseEnabled" && meta.Attrs["KmsMasterKeyId"] != "" {
			v = "false"
		}
		if v == "" {
			continue
		}
		put(n, v)
	}
	put("ApproximateNumberOfMessages", strconv.Itoa(counts.Visible))
	put("ApproximateNumberOfMessagesNotVisible", strconv.Itoa(counts.InFlight))
	put("ApproximateNumberOfMessagesDelayed", strconv.Itoa(counts.Delayed))
	put("CreatedTimestamp", strconv.FormatInt(meta.Created/1000, 10))
	put("LastModifiedTimestamp", strconv.FormatInt(meta.Modified/1000, 10))
	put("QueueArn", b.arn(meta.Name))
	for _, n := range sluiceReadOnlyAttrs {
		if want[n] {
			out[n] = figures[n]
		}
	}
	return out, nil
}
