package sqs

import (
	"context"
	"encoding/base64"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/internal/message"
	"github.com/sluicemq/sluice/internal/sqs/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

type handler func(s *Server, req *request) (wire.Obj, error)

type action struct {
	h         handler
	hasResult bool
	// queue: the action is on the queue its QueueUrl names, which
	// dispatch resolves (and authorises) first: request.queue.
	queue bool
}

var actions = map[string]action{
	"CreateQueue":                  {h: (*Server).createQueue, hasResult: true},
	"DeleteQueue":                  {h: (*Server).deleteQueue, queue: true},
	"GetQueueUrl":                  {h: (*Server).getQueueURL, hasResult: true},
	"ListQueues":                   {h: (*Server).listQueues, hasResult: true},
	"GetQueueAttributes":           {h: (*Server).getQueueAttributes, hasResult: true, queue: true},
	"SetQueueAttributes":           {h: (*Server).setQueueAttributes, queue: true},
	"SendMessage":                  {h: (*Server).sendMessage, hasResult: true, queue: true},
	"SendMessageBatch":             {h: (*Server).sendMessageBatch, hasResult: true, queue: true},
	"ReceiveMessage":               {h: (*Server).receiveMessage, hasResult: true, queue: true},
	"DeleteMessage":                {h: (*Server).deleteMessage, queue: true},
	"DeleteMessageBatch":           {h: (*Server).deleteMessageBatch, hasResult: true, queue: true},
	"ChangeMessageVisibility":      {h: (*Server).changeMessageVisibility, queue: true},
	"ChangeMessageVisibilityBatch": {h: (*Server).changeMessageVisibilityBatch, hasResult: true, queue: true},
	"PurgeQueue":                   {h: (*Server).purgeQueue, queue: true},
	"ListDeadLetterSourceQueues":   {h: (*Server).listDeadLetterSourceQueues, hasResult: true, queue: true},
	"TagQueue":                     {h: (*Server).tagQueue, queue: true},
	"UntagQueue":                   {h: (*Server).untagQueue, queue: true},
	"ListQueueTags":                {h: (*Server).listQueueTags, hasResult: true, queue: true},
	"AddPermission":                {h: (*Server).addPermission, queue: true},
	"RemovePermission":             {h: (*Server).removePermission, queue: true},
	"StartMessageMoveTask":         {h: (*Server).startMessageMoveTask, hasResult: true},
	"ListMessageMoveTasks":         {h: (*Server).listMessageMoveTasks, hasResult: true},
	"CancelMessageMoveTask":        {h: (*Server).cancelMessageMoveTask, hasResult: true},
	// Sluice extensions: a consumer's verdict on a received message.
	"RetryMessage":  {h: (*Server).retryMessage, queue: true},
	"RejectMessage": {h: (*Server).rejectMessage, queue: true},
	"DeferMessage":  {h: (*Server).deferMessage, queue: true},
}

func (s *Server) dispatch(req *request) (wire.Obj, bool, error) {
	a, ok := actions[req.action]
	if !ok {
		return nil, false, st.Errorf(wire.CodeInvalidAction, "The action %s is not valid for this endpoint.", req.action)
	}
	if a.queue {
		name, err := s.queueName(req)
		if err != nil {
			return nil, a.hasResult, err
		}
		req.queue = name
	}
	ctx, cancel := req.ctx(s)
	defer cancel()
	req.bctx = ctx
	out, err := a.h(s, req)
	return out, a.hasResult, err
}

// quickActions never wait on anything but the disk.
var quickActions = map[string]bool{"SendMessage": true, "SendMessageBatch": true, "DeleteMessage": true,
	"DeleteMessageBatch": true, "ChangeMessageVisibility": true, "ChangeMessageVisibilityBatch": true}

// ctx is the context of broker calls: it ends when the client goes away or
// the server shuts down.
// It carries the principal's authorizer, so the broker checks every queue
// an action touches (a dead-letter target, a move destination), not only
// the one in QueueUrl.
func (req *request) ctx(s *Server) (context.Context, context.CancelFunc) {
	base := st.WithRequestID(req.r.Context(), req.id)
	if req.principal != nil {
		base = st.WithAuthorizer(base, req.principal.Allows)
	}
	if quickActions[req.action] {
		// Nothing to cut short at shutdown (Shutdown waits for them):
		// spare the cancel context and its registration.
		return base, func() {}
	}
	ctx, cancel := context.WithCancel(base)
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// queueURL builds the URL of a queue from the request's scheme and Host.
func (s *Server) queueURL(req *request, name string) string {
	base := s.cfg.BaseURL
	if base == "" {
		scheme := "http"
		if req.r.TLS != nil {
			scheme = "https"
		}
		if p := req.r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
			scheme = p
		}
		base = scheme + "://" + req.r.Host
	}
	return strings.TrimRight(base, "/") + "/" + s.cfg.AccountID + "/" + name
}

// queueName resolves QueueUrl (a URL, an /acct/name path, or a bare queue
// name) or the queue named by the request path, and checks the principal
// may use it.
func (s *Server) queueName(req *request) (string, error) {
	raw, err := req.p.Str("QueueUrl")
	if err != nil {
		return "", err
	}
	name := ""
	switch {
	case raw == "" && req.pathQueue != "":
		name = req.pathQueue
	case raw == "":
		return "", wire.Missing("QueueUrl")
	case !strings.Contains(raw, "/"):
		name = raw
	default:
		u, err := url.Parse(raw)
		if err != nil {
			return "", noQueue()
		}
		acct, n, ok := splitQueuePath(u.Path)
		if !ok || acct != s.cfg.AccountID {
			return "", noQueue()
		}
		name = n
	}
	if !req.principal.Allows(name) {
		return "", noQueue()
	}
	return name, nil
}

func noQueue() error {
	return st.Errorf(st.CodeQueueDoesNotExist, "The specified queue does not exist.")
}

func (s *Server) createQueue(req *request) (wire.Obj, error) {
	name, err := req.p.Required("QueueName")
	if err != nil {
		return nil, err
	}
	if !req.principal.Allows(name) {
		return nil, st.Errorf(st.CodeAccessDenied, "Access to the queue %s is denied.", name)
	}
	attrs, err := req.p.StrMap("Attributes")
	if err != nil {
		return nil, err
	}
	tags, err := req.p.StrMap("tags")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	if _, err := s.b.CreateQueue(ctx, name, attrs, tags); err != nil {
		return nil, err
	}
	return wire.Obj{}.Add("QueueUrl", s.queueURL(req, name)), nil
}

func (s *Server) deleteQueue(req *request) (wire.Obj, error) {
	name := req.queue
	ctx := req.bctx
	return nil, s.b.DeleteQueue(ctx, name)
}

func (s *Server) getQueueURL(req *request) (wire.Obj, error) {
	name, err := req.p.Required("QueueName")
	if err != nil {
		return nil, err
	}
	if owner, _ := req.p.Str("QueueOwnerAWSAccountId"); owner != "" && owner != s.cfg.AccountID {
		return nil, noQueue()
	}
	if !req.principal.Allows(name) {
		return nil, noQueue()
	}
	if _, err := s.b.GetQueue(name); err != nil {
		return nil, err
	}
	return wire.Obj{}.Add("QueueUrl", s.queueURL(req, name)), nil
}

// pageParams reads MaxResults (1-1000; 0 when absent) and NextToken.
func pageParams(p wire.Params) (int, string, error) {
	max, err := p.Intp("MaxResults")
	if err != nil {
		return 0, "", err
	}
	m := 0
	if max != nil {
		m = *max
		if m < 1 || m > 1000 {
			return 0, "", st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxResults is invalid. Reason: MaxResults must be an integer between 1 and 1000.", m)
		}
	}
	next, err := p.Str("NextToken")
	return m, next, err
}

func (s *Server) listQueues(req *request) (wire.Obj, error) {
	prefix, err := req.p.Str("QueueNamePrefix")
	if err != nil {
		return nil, err
	}
	m, next, err := pageParams(req.p)
	if err != nil {
		return nil, err
	}
	names, token, err := s.b.ListQueues(prefix, m, next, req.principal.Allows)
	if err != nil {
		return nil, err
	}
	return s.urlList(req, "QueueUrls", names, token), nil
}

func (s *Server) urlList(req *request, member string, names []string, token string) wire.Obj {
	urls := make([]any, len(names))
	for i, n := range names {
		urls[i] = s.queueURL(req, n)
	}
	return wire.Obj{}.Add(member, wire.List{Member: "QueueUrl", Items: urls}).AddStr("NextToken", token)
}

func (s *Server) getQueueAttributes(req *request) (wire.Obj, error) {
	name := req.queue
	names, err := req.p.StrList("AttributeNames")
	if err != nil {
		return nil, err
	}
	attrs, err := s.b.GetQueueAttributes(name, names)
	if err != nil {
		return nil, err
	}
	return wire.Obj{}.Add("Attributes", stringMap("Attribute", "Name", "Value", attrs)), nil
}

func stringMap(entry, key, val string, m map[string]string) wire.Mapv {
	mv := wire.Mapv{Entry: entry, Key: key, Val: val, Vals: map[string]any{}}
	for k, v := range m {
		mv.Keys = append(mv.Keys, k)
		mv.Vals[k] = v
	}
	sort.Strings(mv.Keys)
	return mv
}

func (s *Server) setQueueAttributes(req *request) (wire.Obj, error) {
	name := req.queue
	attrs, err := req.p.StrMap("Attributes")
	if err != nil {
		return nil, err
	}
	if len(attrs) == 0 && !req.p.Has("Attributes") {
		return nil, wire.Missing("Attributes")
	}
	ctx := req.bctx
	return nil, s.b.SetQueueAttributes(ctx, name, attrs)
}

// sendInput decodes one message (a SendMessage request or a batch entry).
func (s *Server) sendInput(req *request, p wire.Params) (st.SendInput, error) {
	var in st.SendInput
	var err error
	if !p.Has("MessageBody") {
		return in, wire.Missing("MessageBody")
	}
	if in.Body, err = p.Str("MessageBody"); err != nil {
		return in, err
	}
	if in.DelaySeconds, err = p.Intp("DelaySeconds"); err != nil {
		return in, err
	}
	if in.Attributes, err = p.MsgAttrs("MessageAttributes"); err != nil {
		return in, err
	}
	sys, err := p.MsgAttrs("MessageSystemAttributes")
	if err != nil {
		return in, err
	}
	for k, v := range sys {
		if k != "AWSTraceHeader" {
			return in, st.Errorf(st.CodeInvalidParameterValue, "Message system attribute name '%s' is invalid.", k)
		}
		if v.DataType != "String" || v.StringValue == nil || *v.StringValue == "" {
			return in, st.Errorf(st.CodeInvalidParameterValue, "Message system attribute 'AWSTraceHeader' must contain a non-empty value of type 'String'.")
		}
		in.TraceHeader = *v.StringValue
	}
	if in.TraceHeader == "" {
		in.TraceHeader = req.r.Header.Get("X-Amzn-Trace-Id")
	}
	if in.GroupID, err = p.Str("MessageGroupId"); err != nil {
		return in, err
	}
	if p.Has("MessageGroupId") && in.GroupID == "" {
		return in, emptyID("MessageGroupId")
	}
	if in.DedupID, err = p.Str("MessageDeduplicationId"); err != nil {
		return in, err
	}
	if p.Has("MessageDeduplicationId") && in.DedupID == "" {
		return in, emptyID("MessageDeduplicationId")
	}
	in.SenderID = req.principal.SenderID()
	if tp := req.r.Header.Get("traceparent"); len(tp) <= 256 {
		in.TraceParent = tp
	}
	return in, nil
}

// orMD5 is sum, the body's MD5 as the broker kept it, or else computed.
func orMD5(sum, body string) string {
	if sum != "" {
		return sum
	}
	return message.BodyMD5(body)
}

func sendResult(in st.SendInput, r st.SendResult) wire.Obj {
	o := make(wire.Obj, 0, 5).Add("MD5OfMessageBody", orMD5(r.MD5OfBody, in.Body)).
		AddStr("MD5OfMessageAttributes", message.AttributesMD5(in.Attributes))
	if in.TraceHeader != "" {
		th := in.TraceHeader
		o = o.AddStr("MD5OfMessageSystemAttributes", message.AttributesMD5(map[string]st.AttributeValue{"AWSTraceHeader": {DataType: "String", StringValue: &th}}))
	}
	return o.Add("MessageId", r.MessageID).AddStr("SequenceNumber", r.SequenceNumber)
}

func emptyID(param string) error {
	return st.Errorf(st.CodeInvalidParameterValue, "Value  for parameter %s is invalid. Reason: %s can only include alphanumeric and punctuation characters. 1 to 128 in length.", param, param)
}

func (s *Server) sendMessage(req *request) (wire.Obj, error) {
	name := req.queue
	in, err := s.sendInput(req, req.p)
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	res, err := s.b.Send(ctx, name, in)
	if err != nil {
		return nil, err
	}
	return sendResult(in, res), nil
}

// validBatchEntryID reports whether id is a valid batch entry id: 1 to 80
// of [A-Za-z0-9_-] (a loop, not a regular expression: ten a request).
func validBatchEntryID(id string) bool {
	if len(id) == 0 || len(id) > 80 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// batchEntries checks the shape every batch action shares.
func batchEntries(p wire.Params, entryName string) ([]wire.Params, error) {
	es, err := p.Entries("Entries")
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, st.Errorf(st.CodeEmptyBatchRequest, "There should be at least one %s in the request.", entryName)
	}
	if len(es) > 10 {
		return nil, st.Errorf(st.CodeTooManyEntriesInBatchRequest, "Maximum number of entries per request are 10. You have sent %d.", len(es))
	}
	seen := map[string]bool{}
	for _, e := range es {
		id, err := e.Str("Id")
		if err != nil {
			return nil, err
		}
		if !validBatchEntryID(id) {
			return nil, st.Errorf(st.CodeInvalidBatchEntryID, "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[id] {
			return nil, st.Errorf(st.CodeBatchEntryIdsNotDistinct, "Id %s repeated.", id)
		}
		seen[id] = true
	}
	return es, nil
}

func failure(id string, err error) wire.Obj {
	e, ok := err.(*st.Error)
	if !ok {
		e = &st.Error{Code: st.CodeInternal, Message: "We encountered an internal error. Please try again."}
	}
	we := wire.Lookup(e.Code)
	return wire.Obj{}.Add("Id", id).Add("SenderFault", wire.Boolean(we.Sender)).Add("Code", we.QueryCode).Add("Message", e.Message)
}

func (s *Server) sendMessageBatch(req *request) (wire.Obj, error) {
	name := req.queue
	es, err := batchEntries(req.p, "SendMessageBatchRequestEntry")
	if err != nil {
		return nil, err
	}
	ins := make([]st.SendInput, len(es))
	ids := make([]string, len(es))
	pre := make([]error, len(es))
	for i, e := range es {
		ids[i], _ = e.Str("Id")
		ins[i], pre[i] = s.sendInput(req, e)
	}
	// Entries that failed to decode are not sent (the broker checks the
	// batch's total size, with the one formula that counts a message).
	send, idx := ins, []int(nil) // idx nil: send is ins, every entry decoded
	if slices.ContainsFunc(pre, func(err error) bool { return err != nil }) {
		send = make([]st.SendInput, 0, len(ins))
		for i := range ins {
			if pre[i] == nil {
				send = append(send, ins[i])
				idx = append(idx, i)
			}
		}
	}
	results := make([]st.SendResult, len(es))
	errs := pre
	if len(send) > 0 {
		res, berrs, err := s.b.SendBatch(req.bctx, name, send)
		if err != nil {
			return nil, err
		}
		for j := range send {
			i := j
			if idx != nil {
				i = idx[j]
			}
			results[i], errs[i] = res[j], berrs[j]
		}
	}
	ok, failed := make([]wire.Obj, 0, len(es)), []any(nil)
	fields := make(wire.Obj, 0, 6*len(es)) // every entry's members, in one allocation
	for i := range es {
		if errs[i] != nil {
			failed = append(failed, failure(ids[i], errs[i]))
			continue
		}
		at := len(fields)
		fields = fields.AddStr("Id", ids[i]).AddStr("MessageId", results[i].MessageID).
			AddStr("MD5OfMessageBody", orMD5(results[i].MD5OfBody, ins[i].Body)).
			AddStr("MD5OfMessageAttributes", message.AttributesMD5(ins[i].Attributes)).
			AddStr("MD5OfMessageSystemAttributes", sysMD5(ins[i].TraceHeader)).
			AddStr("SequenceNumber", results[i].SequenceNumber)
		ok = append(ok, fields[at:len(fields):len(fields)])
	}
	return wire.Obj{}.Add("Successful", wire.List{Member: "SendMessageBatchResultEntry", Objs: ok}).
		Add("Failed", wire.List{Member: "BatchResultErrorEntry", Items: failed}), nil
}

func sysMD5(trace string) string {
	if trace == "" {
		return ""
	}
	return message.AttributesMD5(map[string]st.AttributeValue{"AWSTraceHeader": {DataType: "String", StringValue: &trace}})
}

// wantAttr reports whether a message attribute name passes the filter.
func wantAttr(filter []string, name string) bool {
	for _, f := range filter {
		switch {
		case f == "All" || f == "*" || f == ".*":
			return true
		case strings.HasSuffix(f, ".*"):
			if strings.HasPrefix(name, strings.TrimSuffix(f, "*")) {
				return true
			}
		case f == name:
			return true
		}
	}
	return false
}

func (s *Server) receiveMessage(req *request) (wire.Obj, error) {
	name := req.queue
	var in st.ReceiveInput
	max, err := req.p.Intp("MaxNumberOfMessages")
	if err != nil {
		return nil, err
	}
	if max != nil {
		in.MaxMessages = *max // the broker checks the range
	}
	if in.VisibilityTimeout, err = req.p.Intp("VisibilityTimeout"); err != nil {
		return nil, err
	}
	if in.WaitTimeSeconds, err = req.p.Intp("WaitTimeSeconds"); err != nil {
		return nil, err
	}
	if in.AttemptID, err = req.p.Str("ReceiveRequestAttemptId"); err != nil {
		return nil, err
	}
	// Sluice extension: bind this receive to one shard of the queue
	// (X-Sluice-Partition is the header's former name).
	for _, name := range []string{"X-Sluice-Shard", "X-Sluice-Partition"} {
		if h := req.r.Header.Get(name); h != "" {
			n, err := strconv.Atoi(h)
			if err != nil {
				return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %s for %s is invalid. Reason: must be a shard number.", h, name)
			}
			in.Shard = &n
			break
		}
	}
	sysNames, err := req.p.StrList("AttributeNames")
	if err != nil {
		return nil, err
	}
	more, err := req.p.StrList("MessageSystemAttributeNames")
	if err != nil {
		return nil, err
	}
	sysNames = append(sysNames, more...)
	attrFilter, err := req.p.StrList("MessageAttributeNames")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	msgs, err := s.b.Receive(ctx, name, in)
	if err != nil {
		return nil, err
	}
	items := make([]wire.Obj, 0, len(msgs))
	for _, m := range msgs {
		items = append(items, renderMessage(m, sysNames, attrFilter))
	}
	return wire.Obj{}.Add("Messages", wire.List{Member: "Message", Objs: items}), nil
}

func renderMessage(m st.Message, sysNames, attrFilter []string) wire.Obj {
	o := make(wire.Obj, 0, 7).AddStr("MessageId", m.MessageID).AddStr("ReceiptHandle", m.ReceiptHandle).
		AddStr("MD5OfBody", orMD5(m.MD5OfBody, m.Body)).AddStr("Body", m.Body)
	if len(sysNames) > 0 {
		o = o.Add("Attributes", systemAttrs(m, sysNames))
	}
	if len(m.Attributes) == 0 || len(attrFilter) == 0 {
		return o
	}
	sel := map[string]st.AttributeValue{}
	for k, v := range m.Attributes {
		if wantAttr(attrFilter, k) {
			sel[k] = v
		}
	}
	if len(sel) > 0 {
		o = o.Add("MD5OfMessageAttributes", message.AttributesMD5(sel))
		mv := wire.Mapv{Entry: "MessageAttribute", Key: "Name", Val: "Value", Vals: map[string]any{}}
		for k, v := range sel {
			mv.Keys = append(mv.Keys, k)
			mv.Vals[k] = renderAttrValue(v)
		}
		sort.Strings(mv.Keys)
		o = o.Add("MessageAttributes", mv)
	}
	return o
}

// systemAttrs renders the system attributes named (or All).
func systemAttrs(m st.Message, sysNames []string) wire.Mapv {
	sys := map[string]string{}
	all := false
	want := map[string]bool{}
	for _, n := range sysNames {
		if n == "All" {
			all = true
		}
		want[n] = true
	}
	put := func(n, v string) {
		if v != "" && (all || want[n]) {
			sys[n] = v
		}
	}
	put("SenderId", m.SenderID)
	put("SentTimestamp", strconv.FormatInt(m.SentTimestamp.UnixMilli(), 10))
	if !m.FirstReceiveTimestamp.IsZero() {
		put("ApproximateFirstReceiveTimestamp", strconv.FormatInt(m.FirstReceiveTimestamp.UnixMilli(), 10))
	}
	put("ApproximateReceiveCount", strconv.Itoa(m.ReceiveCount))
	put("MessageGroupId", m.GroupID)
	put("MessageDeduplicationId", m.DedupID)
	put("SequenceNumber", m.SequenceNumber)
	put("AWSTraceHeader", m.TraceHeader)
	put("SluiceTraceParent", m.TraceParent)
	put("DeadLetterQueueSourceArn", m.DeadLetterSourceArn)
	// Sluice's failure attributes, with All or by name.
	if m.RetryLevel > 0 {
		put("SluiceRetryLevel", strconv.Itoa(m.RetryLevel))
	}
	put("SluiceFailureReason", m.FailReason)
	put("SluiceLastError", m.LastError)
	if m.Failures > 0 {
		put("SluiceFailureCount", strconv.Itoa(m.Failures))
		put("SluiceFirstFailureTimestamp", strconv.FormatInt(m.FirstFailure.UnixMilli(), 10))
	}
	return stringMap("Attribute", "Name", "Value", sys)
}

func renderAttrValue(v st.AttributeValue) wire.Obj {
	o := wire.Obj{}
	if v.StringValue != nil {
		o = o.Add("StringValue", *v.StringValue)
	}
	if v.BinaryValue != nil {
		o = o.Add("BinaryValue", base64.StdEncoding.EncodeToString(v.BinaryValue))
	}
	if len(v.StringListValues) > 0 {
		items := make([]any, len(v.StringListValues))
		for i, x := range v.StringListValues {
			items[i] = x
		}
		o = o.Add("StringListValues", wire.List{Member: "StringListValue", Items: items})
	}
	if len(v.BinaryListValues) > 0 {
		items := make([]any, len(v.BinaryListValues))
		for i, x := range v.BinaryListValues {
			items[i] = base64.StdEncoding.EncodeToString(x)
		}
		o = o.Add("BinaryListValues", wire.List{Member: "BinaryListValue", Items: items})
	}
	return o.Add("DataType", v.DataType)
}

func (s *Server) deleteMessage(req *request) (wire.Obj, error) {
	name := req.queue
	h, err := req.p.Required("ReceiptHandle")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	return nil, s.b.Delete(ctx, name, h)
}

func (s *Server) deleteMessageBatch(req *request) (wire.Obj, error) {
	name := req.queue
	es, err := batchEntries(req.p, "DeleteMessageBatchRequestEntry")
	if err != nil {
		return nil, err
	}
	hs := make([]string, len(es))
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i], _ = e.Str("Id")
		if hs[i], err = e.Required("ReceiptHandle"); err != nil {
			return nil, err
		}
	}
	ctx := req.bctx
	errs, err := s.b.DeleteBatch(ctx, name, hs)
	if err != nil {
		return nil, err
	}
	return batchOutcome("DeleteMessageBatchResultEntry", ids, errs), nil
}

func batchOutcome(member string, ids []string, errs []error) wire.Obj {
	var ok []wire.Obj
	var failed []any
	fields := make(wire.Obj, len(ids)) // every entry's Id, in one allocation
	for i, id := range ids {
		if errs[i] != nil {
			failed = append(failed, failure(id, errs[i]))
		} else {
			fields[i] = wire.Field{Name: "Id", Str: id}
			ok = append(ok, fields[i:i+1:i+1])
		}
	}
	return wire.Obj{}.Add("Successful", wire.List{Member: member, Objs: ok}).
		Add("Failed", wire.List{Member: "BatchResultErrorEntry", Items: failed})
}

func (s *Server) changeMessageVisibility(req *request) (wire.Obj, error) {
	name := req.queue
	h, err := req.p.Required("ReceiptHandle")
	if err != nil {
		return nil, err
	}
	v, err := req.p.Intp("VisibilityTimeout")
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, wire.Missing("VisibilityTimeout")
	}
	ctx := req.bctx
	return nil, s.b.ChangeVisibility(ctx, name, h, *v)
}

func (s *Server) changeMessageVisibilityBatch(req *request) (wire.Obj, error) {
	name := req.queue
	es, err := batchEntries(req.p, "ChangeMessageVisibilityBatchRequestEntry")
	if err != nil {
		return nil, err
	}
	in := make([]st.VisibilityChange, len(es))
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i], _ = e.Str("Id")
		if in[i].ReceiptHandle, err = e.Required("ReceiptHandle"); err != nil {
			return nil, err
		}
		v, err := e.Intp("VisibilityTimeout")
		if err != nil {
			return nil, err
		}
		if v != nil {
			in[i].Seconds = *v
		}
	}
	ctx := req.bctx
	errs, err := s.b.ChangeVisibilityBatch(ctx, name, in)
	if err != nil {
		return nil, err
	}
	return batchOutcome("ChangeMessageVisibilityBatchResultEntry", ids, errs), nil
}

func (s *Server) purgeQueue(req *request) (wire.Obj, error) {
	name := req.queue
	ctx := req.bctx
	return nil, s.b.Purge(ctx, name)
}

func (s *Server) listDeadLetterSourceQueues(req *request) (wire.Obj, error) {
	name := req.queue
	m, next, err := pageParams(req.p)
	if err != nil {
		return nil, err
	}
	names, token, err := s.b.ListDeadLetterSourceQueues(name, m, next)
	if err != nil {
		return nil, err
	}
	var visible []string
	for _, n := range names {
		if req.principal.Allows(n) {
			visible = append(visible, n)
		}
	}
	return s.urlList(req, "queueUrls", visible, token), nil
}

func (s *Server) tagQueue(req *request) (wire.Obj, error) {
	name := req.queue
	tags, err := req.p.StrMap("Tags")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	return nil, s.b.TagQueue(ctx, name, tags)
}

func (s *Server) untagQueue(req *request) (wire.Obj, error) {
	name := req.queue
	keys, err := req.p.StrList("TagKeys")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	return nil, s.b.UntagQueue(ctx, name, keys)
}

func (s *Server) listQueueTags(req *request) (wire.Obj, error) {
	name := req.queue
	tags, err := s.b.ListQueueTags(name)
	if err != nil {
		return nil, err
	}
	return wire.Obj{}.Add("Tags", stringMap("Tag", "Key", "Value", tags)), nil
}

func (s *Server) addPermission(req *request) (wire.Obj, error) {
	name := req.queue
	label, err := req.p.Required("Label")
	if err != nil {
		return nil, err
	}
	accts, err := req.p.StrList("AWSAccountIds")
	if err != nil {
		return nil, err
	}
	acts, err := req.p.StrList("Actions")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	return nil, s.b.AddPermission(ctx, name, label, accts, acts)
}

func (s *Server) removePermission(req *request) (wire.Obj, error) {
	name := req.queue
	label, err := req.p.Required("Label")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	return nil, s.b.RemovePermission(ctx, name, label)
}

// arnAllowed checks the principal may use the queue an ARN names.
func (s *Server) arnAllowed(req *request, arn, param string) error {
	if arn == "" {
		return nil
	}
	name, err := s.b.QueueNameFromARN(arn)
	if err != nil || !req.principal.Allows(name) {
		return st.Errorf(st.CodeResourceNotFound, "The resource that you specified for the %s parameter doesn't exist.", param)
	}
	return nil
}

func (s *Server) startMessageMoveTask(req *request) (wire.Obj, error) {
	src, err := req.p.Required("SourceArn")
	if err != nil {
		return nil, err
	}
	dst, err := req.p.Str("DestinationArn")
	if err != nil {
		return nil, err
	}
	if err := s.arnAllowed(req, src, "SourceArn"); err != nil {
		return nil, err
	}
	if err := s.arnAllowed(req, dst, "DestinationArn"); err != nil {
		return nil, err
	}
	rate, err := req.p.Intp("MaxNumberOfMessagesPerSecond")
	if err != nil {
		return nil, err
	}
	r := 0
	if rate != nil {
		r = *rate
		if r < 1 {
			return nil, st.Errorf(st.CodeInvalidParameterValue, "Value %d for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and 500.", r)
		}
	}
	ctx := req.bctx
	h, err := s.b.StartMoveTask(ctx, src, dst, r)
	if err != nil {
		return nil, err
	}
	return wire.Obj{}.Add("TaskHandle", h), nil
}

func (s *Server) listMessageMoveTasks(req *request) (wire.Obj, error) {
	src, err := req.p.Required("SourceArn")
	if err != nil {
		return nil, err
	}
	if err := s.arnAllowed(req, src, "SourceArn"); err != nil {
		return nil, err
	}
	max, err := req.p.Intp("MaxResults")
	if err != nil {
		return nil, err
	}
	m := 0
	if max != nil {
		m = *max
	}
	ctx := req.bctx
	tasks, err := s.b.ListMoveTasks(ctx, src, m)
	if err != nil {
		return nil, err
	}
	items := make([]any, 0, len(tasks))
	for _, t := range tasks {
		o := wire.Obj{}.AddStr("TaskHandle", t.TaskHandle).Add("Status", t.Status).Add("SourceArn", t.SourceArn).
			AddStr("DestinationArn", t.DestinationArn)
		if t.MaxNumberOfMessagesPerSecond > 0 {
			o = o.Add("MaxNumberOfMessagesPerSecond", wire.Num(t.MaxNumberOfMessagesPerSecond))
		}
		o = o.Add("ApproximateNumberOfMessagesMoved", wire.Num(t.ApproximateNumberOfMessagesMoved)).
			Add("ApproximateNumberOfMessagesToMove", wire.Num(t.ApproximateNumberOfMessagesToMove)).
			AddStr("FailureReason", t.FailureReason).
			Add("StartedTimestamp", wire.Num(t.StartedTimestamp.UnixMilli()))
		items = append(items, o)
	}
	return wire.Obj{}.Add("Results", wire.List{Member: "ListMessageMoveTasksResultEntry", Items: items}), nil
}

func (s *Server) cancelMessageMoveTask(req *request) (wire.Obj, error) {
	h, err := req.p.Required("TaskHandle")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	moved, err := s.b.CancelMoveTask(ctx, h)
	if err != nil {
		return nil, err
	}
	return wire.Obj{}.Add("ApproximateNumberOfMessagesMoved", wire.Num(moved)), nil
}

// retryMessage: QueueUrl, ReceiptHandle, DelaySeconds (optional), Reason
// (optional).
func (s *Server) retryMessage(req *request) (wire.Obj, error) {
	name, h, reason, err := s.verdict(req)
	if err != nil {
		return nil, err
	}
	d, err := req.p.Intp("DelaySeconds")
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	return nil, s.b.RetryMessage(ctx, name, h, d, reason)
}

// rejectMessage: QueueUrl, ReceiptHandle, Reason (optional).
func (s *Server) rejectMessage(req *request) (wire.Obj, error) {
	name, h, reason, err := s.verdict(req)
	if err != nil {
		return nil, err
	}
	ctx := req.bctx
	return nil, s.b.RejectMessage(ctx, name, h, reason)
}

// deferMessage: QueueUrl, ReceiptHandle, DelaySeconds.
func (s *Server) deferMessage(req *request) (wire.Obj, error) {
	name, h, _, err := s.verdict(req)
	if err != nil {
		return nil, err
	}
	d, err := req.p.Intp("DelaySeconds")
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, wire.Missing("DelaySeconds")
	}
	ctx := req.bctx
	return nil, s.b.DeferMessage(ctx, name, h, *d)
}

func (s *Server) verdict(req *request) (name, handle, reason string, err error) {
	name = req.queue
	if handle, err = req.p.Required("ReceiptHandle"); err != nil {
		return
	}
	reason, err = req.p.Str("Reason")
	return
}
