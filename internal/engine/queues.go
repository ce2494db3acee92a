package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/attr"
	"github.com/sluicemq/sluice/internal/queue"
	"github.com/sluicemq/sluice/internal/record"
	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// CreateQueue creates a queue, or returns the existing one when every
// given attribute matches (tags are not compared).
func (e *Engine) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (st.QueueInfo, error) {
	if err := validateQueueName(name); err != nil {
		return st.QueueInfo{}, err
	}
	fifo := strings.HasSuffix(name, ".fifo")
	if v, ok := attrs["FifoQueue"]; ok {
		if v != "true" && v != "false" {
			return st.QueueInfo{}, attr.InvalidValue("FifoQueue", "")
		}
		if (v == "true") != fifo {
			return st.QueueInfo{}, st.Errorf(st.CodeInvalidParameterValue, "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
		}
	} else if fifo {
		return st.QueueInfo{}, st.Errorf(st.CodeInvalidParameterValue, "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
	}
	clean, err := attr.Validate(attrs, fifo, true)
	if err != nil {
		return st.QueueInfo{}, err
	}
	delete(clean, "FifoQueue")
	if err := validateTags(tags); err != nil {
		return st.QueueInfo{}, err
	}
	if err := e.checkRedriveTarget(ctx, name, clean, fifo); err != nil {
		return st.QueueInfo{}, err
	}
	now := e.clock.Now()
	e.mu.Lock()
	if o := e.queues[name]; o != nil {
		e.mu.Unlock()
		o.mu.Lock()
		defer o.mu.Unlock()
		names := make([]string, 0, len(clean))
		for k := range clean {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if attr.Effective(o.meta.Attrs, k) != attr.Effective(clean, k) {
				return st.QueueInfo{}, st.Errorf(st.CodeQueueNameExists, "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return st.QueueInfo{Name: name, ARN: e.ARN(name), FIFO: o.meta.FIFO}, nil
	}
	if at, ok := e.deletedAt[name]; ok && now.Sub(at) < 60*time.Second {
		e.mu.Unlock()
		return st.QueueInfo{}, st.Errorf(st.CodeQueueDeletedRecently, "You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	}
	if len(e.queues) >= e.cfg.MaxQueues {
		e.mu.Unlock()
		return st.QueueInfo{}, st.Errorf(st.CodeOverLimit, "This server holds the maximum of %d queues.", e.cfg.MaxQueues)
	}
	p := e.nextPart
	e.nextPart++
	meta := record.QueueMeta{ID: uint64(p), Name: name, FIFO: fifo, Attrs: clean, Tags: cloneTags(tags), Created: now.UnixMilli(), Modified: now.UnixMilli()}
	o := newOwner(e, p, meta)
	// Installed at once, so that a second create waits for this one's
	// outcome; written first to the queue's own partition (its settings:
	// the partition is whole on its own), then to the catalog.
	e.queues[name], e.byPart[p] = o, o
	e.mu.Unlock()
	o.lock()
	err = o.persistLocked([]*record.Record{o.q.MetaRecord(&meta)})
	o.mu.Unlock()
	if err == nil {
		err = e.catalogAppend(&record.Record{Type: record.Create, Partition: uint64(p), Name: name})
	}
	if err != nil {
		e.mu.Lock()
		if e.queues[name] == o {
			delete(e.queues, name)
			delete(e.byPart, p)
		}
		e.mu.Unlock()
		o.mu.Lock()
		o.deleted = true
		o.mu.Unlock()
		e.st.Drop(p) // best effort: an orphan partition is dropped at recovery anyway
		return st.QueueInfo{}, err
	}
	return st.QueueInfo{Name: name, ARN: e.ARN(name), FIFO: fifo}, nil
}

func cloneTags(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func validateTags(tags map[string]string) error {
	if len(tags) > 50 {
		return st.Errorf(st.CodeInvalidParameterValue, "Too many tags added for queue. The maximum is 50 tags.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 {
			return st.Errorf(st.CodeInvalidParameterValue, "Tag keys must be between 1 and 128 characters in length.")
		}
		if len(v) > 256 {
			return st.Errorf(st.CodeInvalidParameterValue, "Tag values may only be up to 256 characters in length.")
		}
	}
	return nil
}

// checkRedriveTarget checks a RedrivePolicy's dead-letter target: the
// caller may use it (else it answers as if it did not exist: no existence
// oracle across principals), it exists, it has the queue's type, and its
// RedriveAllowPolicy admits the queue.
func (e *Engine) checkRedriveTarget(ctx context.Context, source string, attrs map[string]string, fifo bool) error {
	rp := attrs["RedrivePolicy"]
	if rp == "" {
		return nil
	}
	p, err := attr.ParseRedrivePolicy(rp)
	if err != nil {
		return err
	}
	missing := attr.InvalidValue("RedrivePolicy", "Dead-letter target does not exist")
	name, err := e.QueueNameFromARN(p.DeadLetterTargetArn)
	if err != nil || !st.Authorized(ctx, name) {
		return missing
	}
	dlq, err := e.lookup(name)
	if err != nil {
		return missing
	}
	dlq.mu.Lock()
	dfifo, allow := dlq.meta.FIFO, dlq.cfg.RedriveAllowPolicy
	dlq.mu.Unlock()
	if dfifo != fifo {
		return attr.InvalidValue("RedrivePolicy", "Dead-letter target must be of the same type as the source queue (standard or FIFO)")
	}
	if allow != nil && !allow.Allows(e.ARN(source)) {
		return attr.InvalidValue("RedrivePolicy", "The dead-letter target's RedriveAllowPolicy does not allow "+source+" as a source queue")
	}
	return nil
}

// GetQueue returns a queue's identity.
func (e *Engine) GetQueue(name string) (st.QueueInfo, error) {
	o, err := e.lookup(name)
	if err != nil {
		return st.QueueInfo{}, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return st.QueueInfo{Name: o.meta.Name, ARN: e.ARN(o.meta.Name), FIFO: o.meta.FIFO}, nil
}

// ListQueues lists queue names with the prefix in name order, paged.
func (e *Engine) ListQueues(prefix string, max int, next string, allow func(string) bool) ([]string, string, error) {
	e.mu.RLock()
	names := make([]string, 0, len(e.queues))
	for n := range e.queues {
		if strings.HasPrefix(n, prefix) && (allow == nil || allow(n)) {
			names = append(names, n)
		}
	}
	e.mu.RUnlock()
	return page(names, max, next, 1000)
}

// page sorts names and returns one page after the token.
func page(names []string, max int, next string, limit int) ([]string, string, error) {
	if max < 0 || max > limit {
		return nil, "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxResults is invalid. Reason: MaxResults must be an integer between 1 and %d.", max, limit)
	}
	sort.Strings(names)
	if next != "" {
		after, err := base64.RawURLEncoding.DecodeString(next)
		if err != nil {
			return nil, "", st.Errorf(st.CodeInvalidParameterValue, "Invalid NextToken value.")
		}
		i := sort.SearchStrings(names, string(after))
		for i < len(names) && names[i] <= string(after) {
			i++
		}
		names = names[i:]
	}
	if max == 0 {
		if len(names) > limit {
			names = names[:limit]
		}
		return names, "", nil
	}
	if len(names) > max {
		names = names[:max]
		return names, base64.RawURLEncoding.EncodeToString([]byte(names[max-1])), nil
	}
	return names, "", nil
}

// DeleteQueue deletes a queue and its messages once its deletion is
// durable. The name can be reused after 60 seconds.
func (e *Engine) DeleteQueue(ctx context.Context, name string) error {
	o, err := e.lookup(name)
	if err != nil {
		return err
	}
	if err := e.catalogAppend(&record.Record{Type: record.Drop, Partition: uint64(o.p)}); err != nil {
		return err
	}
	e.mu.Lock()
	if e.queues[name] == o {
		delete(e.queues, name)
		delete(e.byPart, o.p)
		e.deletedAt[name] = e.clock.Now()
	}
	e.mu.Unlock()
	o.mu.Lock()
	o.deleted = true
	o.wakeLocked()
	var gone []queue.Gone
	o.q.Messages(func(m *queue.Msg) { gone = append(gone, queue.Gone{Seq: m.Seq, Loc: m.Loc}) })
	o.mu.Unlock()
	o.release(gone)
	// The partition goes; a failure here leaves it to recovery, which
	// drops partitions the catalog does not name.
	if err := o.e.st.Drop(o.p).Wait(ctx); err != nil {
		e.log.Warn("dropping a deleted queue's partition failed; recovery will", "queue", name, "err", err)
	}
	return nil
}

// GetQueueAttributes returns the named attributes ("All" for all).
func (e *Engine) GetQueueAttributes(name string, names []string) (map[string]string, error) {
	o, err := e.lookup(name)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	all := false
	for _, n := range names {
		if n == "All" {
			all = true
			continue
		}
		if !attr.Known(n) {
			return nil, st.Errorf(st.CodeInvalidAttributeName, "Unknown Attribute %s.", n)
		}
		want[n] = true
	}
	now := e.clock.Now()
	o.lock()
	counts := o.q.Counts(now)
	meta := o.meta
	var figures map[string]string
	for _, n := range attr.SluiceReadOnly {
		if want[n] {
			figures = tenantFigures(o, now)
			break
		}
	}
	out := map[string]string{}
	for n, v := range attr.Render(&meta) {
		if all || want[n] {
			out[n] = v
		}
	}
	o.unlock() // retention may have dropped some
	put := func(n, v string) {
		if all || want[n] {
			out[n] = v
		}
	}
	put("ApproximateNumberOfMessages", strconv.Itoa(counts.Visible))
	put("ApproximateNumberOfMessagesNotVisible", strconv.Itoa(counts.InFlight))
	put("ApproximateNumberOfMessagesDelayed", strconv.Itoa(counts.Delayed))
	put("CreatedTimestamp", strconv.FormatInt(meta.Created/1000, 10))
	put("LastModifiedTimestamp", strconv.FormatInt(meta.Modified/1000, 10))
	put("QueueArn", e.ARN(meta.Name))
	for _, n := range attr.SluiceReadOnly {
		if want[n] {
			out[n] = figures[n]
		}
	}
	return out, nil
}

// SetQueueAttributes validates and sets attributes.
func (e *Engine) SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	o, err := e.lookup(name)
	if err != nil {
		return err
	}
	o.mu.Lock()
	fifo := o.meta.FIFO
	o.mu.Unlock()
	clean, err := attr.Validate(attrs, fifo, false)
	if err != nil {
		return err
	}
	if err := e.checkRedriveTarget(ctx, name, clean, fifo); err != nil {
		return err
	}
	return e.updateMeta(o, func(m *record.QueueMeta) error {
		attr.Apply(m.Attrs, clean)
		return nil
	})
}

// updateMeta changes a queue's metadata and persists it whole; the change
// takes effect once durable.
func (e *Engine) updateMeta(o *owner, f func(m *record.QueueMeta) error) error {
	o.metaMu.Lock()
	defer o.metaMu.Unlock()
	o.lock()
	if o.deleted {
		o.mu.Unlock()
		return noQueue()
	}
	meta := o.meta.Clone()
	if meta.Attrs == nil {
		meta.Attrs = map[string]string{}
	}
	if err := f(&meta); err != nil {
		o.mu.Unlock()
		return err
	}
	meta.Modified = e.clock.Now().UnixMilli()
	err := o.persistLocked([]*record.Record{o.q.MetaRecord(&meta)})
	o.wakeLocked() // new limits may let receivers on
	o.unlock()
	return err
}

// TagQueue adds or overwrites tags.
func (e *Engine) TagQueue(ctx context.Context, name string, tags map[string]string) error {
	o, err := e.lookup(name)
	if err != nil {
		return err
	}
	if len(tags) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter Tags.")
	}
	return e.updateMeta(o, func(m *record.QueueMeta) error {
		merged := cloneTags(m.Tags)
		if merged == nil {
			merged = map[string]string{}
		}
		for k, v := range tags {
			merged[k] = v
		}
		if err := validateTags(merged); err != nil {
			return err
		}
		m.Tags = merged
		return nil
	})
}

// UntagQueue removes tags; missing keys are ignored.
func (e *Engine) UntagQueue(ctx context.Context, name string, keys []string) error {
	o, err := e.lookup(name)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter TagKeys.")
	}
	return e.updateMeta(o, func(m *record.QueueMeta) error {
		for _, k := range keys {
			delete(m.Tags, k)
		}
		return nil
	})
}

// ListQueueTags returns the queue's tags.
func (e *Engine) ListQueueTags(name string) (map[string]string, error) {
	o, err := e.lookup(name)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return cloneTags(o.meta.Tags), nil
}

// ListDeadLetterSourceQueues lists the queues whose RedrivePolicy targets
// queue, paged like ListQueues.
func (e *Engine) ListDeadLetterSourceQueues(name string, max int, next string) ([]string, string, error) {
	if _, err := e.lookup(name); err != nil {
		return nil, "", err
	}
	return page(e.sourcesOf(e.ARN(name)), max, next, 1000)
}

// sourcesOf lists the queues whose dead-letter queue is arn.
func (e *Engine) sourcesOf(arn string) []string {
	var names []string
	for _, o := range e.all() {
		o.mu.Lock()
		if o.cfg.DeadLetterTarget == arn {
			names = append(names, o.meta.Name)
		}
		o.mu.Unlock()
	}
	return names
}

// SetTenantLimits sets (or, with a zero value, clears) one tenant's
// overrides on a queue.
func (e *Engine) SetTenantLimits(ctx context.Context, queue, tenant string, l st.TenantLimits) error {
	if l.Weight < 0 || l.Weight > 1000 || l.MaxInFlight < 0 || l.SendRate < 0 || l.SendBurst < 0 ||
		l.ReceiveRate < 0 || l.ReceiveBurst < 0 || l.BacklogTarget < 0 {
		return st.Errorf(st.CodeInvalidParameterValue, "Tenant limits must not be negative, and the weight must be at most 1000.")
	}
	o, err := e.lookup(queue)
	if err != nil {
		return err
	}
	return e.updateMeta(o, func(m *record.QueueMeta) error {
		if l == (st.TenantLimits{}) {
			delete(m.Tenants, tenant)
			return nil
		}
		if m.Tenants == nil {
			m.Tenants = map[string]record.TenantLimits{}
		}
		if len(m.Tenants) >= 10000 {
			if _, ok := m.Tenants[tenant]; !ok {
				return st.Errorf(st.CodeOverLimit, "A queue holds at most 10000 tenant overrides.")
			}
		}
		m.Tenants[tenant] = record.TenantLimits(l)
		return nil
	})
}

// ---- permissions (the queue's Policy attribute) ----

type policyDoc struct {
	Version   string            `json:"Version"`
	ID        string            `json:"Id"`
	Statement []policyStatement `json:"Statement"`
}

type policyStatement struct {
	Sid       string `json:"Sid"`
	Effect    string `json:"Effect"`
	Principal struct {
		AWS any `json:"AWS"`
	} `json:"Principal"`
	Action   any    `json:"Action"`
	Resource string `json:"Resource"`
}

func oneOrMany(v []string) any {
	if len(v) == 1 {
		return v[0]
	}
	return v
}

// AddPermission adds a statement to the queue's Policy.
func (e *Engine) AddPermission(ctx context.Context, name, label string, accounts, actions []string) error {
	o, err := e.lookup(name)
	if err != nil {
		return err
	}
	if !validName(label, 80, false) {
		return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.", label)
	}
	if len(accounts) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter AWSAccountIds.")
	}
	if len(actions) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter Actions.")
	}
	arn := e.ARN(name)
	return e.updateMeta(o, func(m *record.QueueMeta) error {
		doc := policyDoc{Version: "2008-10-17", ID: arn + "/SQSDefaultPolicy"}
		if p := m.Attrs["Policy"]; p != "" {
			_ = json.Unmarshal([]byte(p), &doc)
		}
		for _, s := range doc.Statement {
			if s.Sid == label {
				return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: Already exists.", label)
			}
		}
		if len(doc.Statement) >= 20 {
			return st.Errorf(st.CodeOverLimit, "Too many permissions on this queue (the maximum is 20 statements).")
		}
		s := policyStatement{Sid: label, Effect: "Allow", Resource: arn}
		principals := make([]string, len(accounts))
		for i, a := range accounts {
			principals[i] = "arn:aws:iam::" + a + ":root"
		}
		acts := make([]string, len(actions))
		for i, a := range actions {
			acts[i] = "SQS:" + a
		}
		s.Principal.AWS = oneOrMany(principals)
		s.Action = oneOrMany(acts)
		doc.Statement = append(doc.Statement, s)
		raw, _ := json.Marshal(doc)
		m.Attrs["Policy"] = string(raw)
		return nil
	})
}

// RemovePermission removes the statement with the label.
func (e *Engine) RemovePermission(ctx context.Context, name, label string) error {
	o, err := e.lookup(name)
	if err != nil {
		return err
	}
	return e.updateMeta(o, func(m *record.QueueMeta) error {
		var doc policyDoc
		if p := m.Attrs["Policy"]; p != "" {
			_ = json.Unmarshal([]byte(p), &doc)
		}
		kept := doc.Statement[:0]
		found := false
		for _, s := range doc.Statement {
			if s.Sid == label {
				found = true
				continue
			}
			kept = append(kept, s)
		}
		if !found {
			return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: can't find label.", label)
		}
		if len(kept) == 0 {
			delete(m.Attrs, "Policy")
			return nil
		}
		doc.Statement = kept
		raw, _ := json.Marshal(doc)
		m.Attrs["Policy"] = string(raw)
		return nil
	})
}

// partitionOf is a queue's partition (tests).
func (e *Engine) partitionOf(name string) store.PartitionID {
	o, err := e.lookup(name)
	if err != nil {
		return 0
	}
	return o.p
}
