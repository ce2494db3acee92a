package engine

import (
	"context"
	"encoding/base64"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/attr"
	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/partition"
	"github.com/sluicemq/sluice/internal/record"
	st "github.com/sluicemq/sluice/sluicetype"
)

// CreateQueue creates a queue, or returns the existing one when every
// given attribute matches (tags are not compared).
func (e *Engine) CreateQueue(ctx context.Context, name string, attrs, tags map[string]string) (st.QueueInfo, error) {
	if err := message.ValidateQueueName(name); err != nil {
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
	if err := attr.ValidateTags(tags); err != nil {
		return st.QueueInfo{}, err
	}
	if err := e.checkRedriveTarget(ctx, name, clean, fifo); err != nil {
		return st.QueueInfo{}, err
	}
	now := e.clock.Now()
	if !e.ownsCatalog() {
		return st.QueueInfo{}, partition.NotOwner()
	}
	e.mu.Lock()
	if _, ok := e.names[name]; ok && e.queues[name] == nil {
		// Another node of the cluster owns it (and its settings).
		e.mu.Unlock()
		have, err := e.remoteSettings(ctx, name)
		if err != nil {
			return st.QueueInfo{}, err
		}
		if err := sameAttrs(have, clean); err != nil {
			return st.QueueInfo{}, err
		}
		return st.QueueInfo{Name: name, ARN: e.ARN(name), FIFO: fifo}, nil
	}
	if o := e.queues[name]; o != nil {
		e.mu.Unlock()
		meta := o.Meta()
		if err := sameAttrs(meta.Attrs, clean); err != nil {
			return st.QueueInfo{}, err
		}
		return st.QueueInfo{Name: name, ARN: e.ARN(name), FIFO: meta.FIFO}, nil
	}
	if at, ok := e.freeAt[name]; ok && now.Before(at) {
		e.mu.Unlock()
		return st.QueueInfo{}, st.Errorf(st.CodeQueueDeletedRecently, "You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	}
	if len(e.names) >= e.cfg.MaxQueues {
		e.mu.Unlock()
		return st.QueueInfo{}, st.Errorf(st.CodeOverLimit, "This server holds the maximum of %d queues.", e.cfg.MaxQueues)
	}
	p := e.nextPart
	e.nextPart++
	meta := record.QueueMeta{ID: uint64(p), Name: name, FIFO: fifo, Attrs: clean, Tags: cloneTags(tags), Created: now.UnixMilli(), Modified: now.UnixMilli()}
	o := partition.New(e.host, p, meta)
	// Installed at once, so that a second create waits for this one's
	// outcome; written first to the queue's own partition (its settings:
	// the partition is whole on its own), then to the catalog. In a
	// cluster this node takes the new partition's lease first: it owns
	// what it creates (the cluster may hand it to another node later).
	e.queues[name], e.byPart[p] = o, o
	e.mu.Unlock()
	// The catalog reserves the id before anything is written under it:
	// should the creation fail and its partition be dropped, no later
	// queue gets the id again after a restart (a store may refuse a
	// dropped partition for good).
	err = e.catalogAppend(&record.Record{Type: record.Catalog, NextPartition: uint64(p) + 1})
	if err == nil {
		err = e.claim(p)
	}
	if err == nil {
		err = o.Create()
	}
	if err == nil {
		err = e.catalogAppend(&record.Record{Type: record.Create, Partition: uint64(p), Name: name})
	}
	if err == nil {
		e.mu.Lock()
		e.names[name] = p
		delete(e.freeAt, name)
		e.mu.Unlock()
		e.catalogChanged()
		e.cl.Created(p)
	}
	if err != nil {
		e.mu.Lock()
		if e.queues[name] == o {
			delete(e.queues, name)
			delete(e.byPart, p)
		}
		e.mu.Unlock()
		if last, owned := o.Deleted(); owned {
			e.st.Drop(p, last) // best effort: an orphan partition is dropped at recovery anyway
		}
		return st.QueueInfo{}, err
	}
	return st.QueueInfo{Name: name, ARN: e.ARN(name), FIFO: fifo}, nil
}

// sameAttrs answers a CreateQueue of an existing queue: an error naming
// the first attribute asked for whose value differs from the queue's.
func sameAttrs(have, asked map[string]string) error {
	names := make([]string, 0, len(asked))
	for k := range asked {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if attr.Effective(have, k) != attr.Effective(asked, k) {
			return st.Errorf(st.CodeQueueNameExists, "A queue already exists with the same name and a different value for attribute %s", k)
		}
	}
	return nil
}

// remoteSettings asks the node that owns queue name (another one) for
// the queue's attributes: its own partition holds them.
func (e *Engine) remoteSettings(ctx context.Context, name string) (map[string]string, error) {
	attrs, ok := e.cl.Settings(ctx, name)
	if !ok {
		return nil, &st.Error{Code: st.CodeServiceUnavailable, RetryAfter: time.Second,
			Message: "The node that owns queue " + name + " did not answer with its attributes; retry the request."}
	}
	return attrs, nil
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
	var dfifo bool
	var allow *attr.RedriveAllowPolicy
	dlq, err := e.Queue(name)
	switch {
	case err != nil && e.clustered:
		// Another node owns it, and its settings: its type is in its name.
		if _, _, rerr := e.Route(name); rerr != nil {
			return missing
		}
		have, err := e.remoteSettings(ctx, name)
		if err != nil {
			return err
		}
		dfifo = strings.HasSuffix(name, ".fifo")
		if v := have["RedriveAllowPolicy"]; v != "" {
			p, err := attr.ParseRedriveAllowPolicy(v)
			if err != nil {
				return err // checked when it was set: not expected
			}
			allow = &p
		}
	case err != nil:
		return missing
	default:
		dcfg := dlq.Config()
		dfifo, allow = dcfg.Queue.FIFO, dcfg.RedriveAllowPolicy
	}
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
	o, err := e.Queue(name)
	if err != nil && e.clustered {
		// Another node owns it: the catalog says it exists.
		if _, _, rerr := e.Route(name); rerr != nil {
			return st.QueueInfo{}, rerr
		}
		return st.QueueInfo{Name: name, ARN: e.ARN(name), FIFO: strings.HasSuffix(name, ".fifo")}, nil
	}
	if err != nil {
		return st.QueueInfo{}, err
	}
	meta := o.Meta()
	return st.QueueInfo{Name: meta.Name, ARN: e.ARN(meta.Name), FIFO: meta.FIFO}, nil
}

// ListQueues lists queue names with the prefix in name order, paged.
func (e *Engine) ListQueues(prefix string, max int, next string, allow func(string) bool) ([]string, string, error) {
	e.mu.RLock()
	names := make([]string, 0, len(e.names))
	for n := range e.names {
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
	e.mu.RLock()
	p, ok := e.names[name]
	e.mu.RUnlock()
	if !ok {
		return partition.NoQueue()
	}
	freeAt := e.clock.Now().Add(nameReuseAfter)
	if err := e.catalogAppend(&record.Record{Type: record.Drop, Partition: uint64(p), Name: name, Until: freeAt.UnixMilli()}); err != nil {
		return err
	}
	e.mu.Lock()
	if e.names[name] == p {
		delete(e.names, name)
		e.freeAt[name] = freeAt
	}
	o := e.byPart[p]
	if o != nil {
		delete(e.queues, name)
		delete(e.byPart, p)
	}
	e.mu.Unlock()
	e.catalogChanged()
	if o != nil {
		e.drop(ctx, name, o)
	}
	return nil
}

// nameReuseAfter is how long after its deletion a queue's name may not be
// used again (SQS: 60 seconds). The catalog remembers it across restarts
// and moves of the catalog.
const nameReuseAfter = 60 * time.Second

// drop ends a deleted queue's owner and drops its partition; a failure
// leaves the partition to recovery, which drops partitions the catalog
// does not name.
func (e *Engine) drop(ctx context.Context, name string, o *partition.Owner) {
	if last, owned := o.Deleted(); owned {
		if err := e.st.Drop(o.Partition(), last).Wait(ctx); err != nil {
			e.log.Warn("dropping a deleted queue's partition failed; recovery will", "queue", name, "err", err)
		}
	}
}

// GetQueueAttributes returns the named attributes ("All" for all).
func (e *Engine) GetQueueAttributes(name string, names []string) (map[string]string, error) {
	o, err := e.Queue(name)
	if err != nil {
		return nil, err
	}
	return o.Attributes(names)
}

// SetQueueAttributes validates and sets attributes.
func (e *Engine) SetQueueAttributes(ctx context.Context, name string, attrs map[string]string) error {
	o, err := e.Queue(name)
	if err != nil {
		return err
	}
	fifo := o.Config().Queue.FIFO
	clean, err := attr.Validate(attrs, fifo, false)
	if err != nil {
		return err
	}
	if err := e.checkRedriveTarget(ctx, name, clean, fifo); err != nil {
		return err
	}
	return o.UpdateMeta(func(m *record.QueueMeta) error {
		attr.Apply(m.Attrs, clean)
		return nil
	})
}

// TagQueue adds or overwrites tags.
func (e *Engine) TagQueue(ctx context.Context, name string, tags map[string]string) error {
	o, err := e.Queue(name)
	if err != nil {
		return err
	}
	if len(tags) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter Tags.")
	}
	return o.UpdateMeta(func(m *record.QueueMeta) error {
		merged := cloneTags(m.Tags)
		if merged == nil {
			merged = map[string]string{}
		}
		for k, v := range tags {
			merged[k] = v
		}
		if err := attr.ValidateTags(merged); err != nil {
			return err
		}
		m.Tags = merged
		return nil
	})
}

// UntagQueue removes tags; missing keys are ignored.
func (e *Engine) UntagQueue(ctx context.Context, name string, keys []string) error {
	o, err := e.Queue(name)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter TagKeys.")
	}
	return o.UpdateMeta(func(m *record.QueueMeta) error {
		for _, k := range keys {
			delete(m.Tags, k)
		}
		return nil
	})
}

// ListQueueTags returns the queue's tags.
func (e *Engine) ListQueueTags(name string) (map[string]string, error) {
	o, err := e.Queue(name)
	if err != nil {
		return nil, err
	}
	return cloneTags(o.Meta().Tags), nil
}

// ListDeadLetterSourceQueues lists the queues whose RedrivePolicy targets
// queue, paged like ListQueues.
func (e *Engine) ListDeadLetterSourceQueues(name string, max int, next string) ([]string, string, error) {
	if _, err := e.Queue(name); err != nil {
		return nil, "", err
	}
	return page(e.sourcesOf(e.ARN(name)), max, next, 1000)
}

// sourcesOf lists the queues whose dead-letter queue is arn, sorted: in a
// cluster, those of every node that answers.
func (e *Engine) sourcesOf(arn string) []string {
	if names, ok := e.cl.Sources(arn); ok {
		slices.Sort(names)
		return slices.Compact(names)
	}
	return e.sourcesHere(arn)
}

// sourcesHere lists the queues this node owns whose dead-letter queue is
// arn.
func (e *Engine) sourcesHere(arn string) []string {
	names := []string{}
	for _, o := range e.all() {
		if o.Config().DeadLetterTarget == arn {
			names = append(names, o.Meta().Name)
		}
	}
	slices.Sort(names)
	return names
}

// SetTenantLimits sets (or, with a zero value, clears) one tenant's
// overrides on a queue.
func (e *Engine) SetTenantLimits(ctx context.Context, queue, tenant string, l st.TenantLimits) error {
	if l.Weight < 0 || l.Weight > 1000 || l.MaxInFlight < 0 || l.SendRate < 0 || l.SendBurst < 0 ||
		l.ReceiveRate < 0 || l.ReceiveBurst < 0 || l.BacklogTarget < 0 {
		return st.Errorf(st.CodeInvalidParameterValue, "Tenant limits must not be negative, and the weight must be at most 1000.")
	}
	o, err := e.Queue(queue)
	if err != nil {
		return err
	}
	return o.UpdateMeta(func(m *record.QueueMeta) error {
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

// AddPermission adds a statement to the queue's Policy.
func (e *Engine) AddPermission(ctx context.Context, name, label string, accounts, actions []string) error {
	o, err := e.Queue(name)
	if err != nil {
		return err
	}
	if !message.ValidName(label, 80, false) {
		return st.Errorf(st.CodeInvalidParameterValue, "Value %s for parameter Label is invalid. Reason: Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length.", label)
	}
	if len(accounts) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter AWSAccountIds.")
	}
	if len(actions) == 0 {
		return st.Errorf(st.CodeMissingParameter, "The request must contain the parameter Actions.")
	}
	return o.UpdateMeta(func(m *record.QueueMeta) error {
		p, err := attr.AddPermission(m.Attrs["Policy"], e.ARN(name), label, accounts, actions)
		if err == nil {
			m.Attrs["Policy"] = p
		}
		return err
	})
}

// RemovePermission removes the statement with the label.
func (e *Engine) RemovePermission(ctx context.Context, name, label string) error {
	o, err := e.Queue(name)
	if err != nil {
		return err
	}
	return o.UpdateMeta(func(m *record.QueueMeta) error {
		p, err := attr.RemovePermission(m.Attrs["Policy"], label)
		if err != nil {
			return err
		}
		if p == "" {
			delete(m.Attrs, "Policy")
		} else {
			m.Attrs["Policy"] = p
		}
		return nil
	})
}
