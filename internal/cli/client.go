package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/internal/cmdkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

type clientCmd struct {
	env      Env
	admin    *adminClient
	c        *awssqs.Client
	json     bool
	endpoint string
	region   string
}

func (k *clientCmd) url(ctx context.Context, name string) (*string, error) {
	out, err := k.c.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	return out.QueueUrl, nil
}

// clientFlags adds the flags every command that talks to a server over
// its API takes (--endpoint, --region, --json) to fs, defaults from the
// environment (SLUICE_REGION is the one `sluice serve` reads), and returns
// the command they configure; its SQS client is made once fs is parsed.
func clientFlags(fs *flag.FlagSet, env Env) *clientCmd {
	endpoint := env.Getenv("SLUICE_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:9324"
	}
	region := env.Getenv("SLUICE_REGION")
	if region == "" {
		region = "us-east-1"
	}
	k := &clientCmd{env: env}
	fs.StringVar(&k.endpoint, "endpoint", endpoint, "server URL")
	fs.StringVar(&k.region, "region", region, "the server's region: requests are signed for it, and topics builds ARNs in it")
	fs.BoolVar(&k.json, "json", false, "print JSON")
	return k
}

func client(ctx context.Context, args []string, env Env) error {
	cmd := args[0]
	sub := ""
	rest := args[1:]
	if cmd == "tenants" && len(rest) > 0 && (rest[0] == "set" || rest[0] == "show") {
		sub, rest = rest[0], rest[1:]
	}
	if cmd == "queues" || cmd == "dlq" {
		if len(rest) == 0 {
			return fmt.Errorf("%s needs a subcommand (see sluice --help)", cmd)
		}
		sub, rest = rest[0], rest[1:]
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	k := clientFlags(fs, env)
	var attrs repeated
	fs.Var(&attrs, "attr", "KEY=VALUE (repeatable)")
	fifo := fs.Bool("fifo", false, "create a FIFO queue")
	prefix := fs.String("prefix", "", "queue name prefix")
	group := fs.String("group", "", "MessageGroupId (tenant on standard queues)")
	dedup := fs.String("dedup", "", "MessageDeduplicationId")
	delay := fs.Int("delay", -1, "DelaySeconds")
	max := fs.Int("max", 1, "messages to receive (1-10)")
	wait := fs.Int("wait", 0, "long-poll seconds (0-20)")
	vis := fs.Int("visibility", -1, "visibility timeout seconds")
	del := fs.Bool("delete", false, "delete what was received")
	to := fs.String("to", "", "redrive destination queue (default: each message's source)")
	rate := fs.Int("rate", 0, "redrive messages per second (1-500; default unlimited)")
	adminURL := env.Getenv("SLUICE_ADMIN_ENDPOINT")
	if adminURL == "" {
		adminURL = "http://127.0.0.1:9325"
	}
	fs.StringVar(&adminURL, "admin", adminURL, "admin API URL (tenants, watermark, dead-letter filters)")
	adminToken := fs.String("admin-token", env.Getenv("SLUICE_ADMIN_TOKEN"), "the admin API's token, if the server has one")
	var f filter
	fs.StringVar(&f.tenant, "tenant", "", "only this tenant")
	fs.StringVar(&f.source, "source", "", "only messages dead-lettered from this queue (name or ARN)")
	fs.StringVar(&f.reason, "reason", "", "only this failure reason (Retry, Reject, VisibilityTimeout, ...)")
	fs.StringVar(&f.since, "since", "", "only messages sent since (RFC 3339, or a duration ago like 2h)")
	fs.StringVar(&f.until, "until", "", "only messages sent before (RFC 3339, or a duration ago)")
	fs.StringVar(&f.contains, "contains", "", "only messages whose body contains this")
	before := fs.String("before", "", "drop-before: the watermark time (RFC 3339, or a duration ago like 1h)")
	after := fs.String("after", "", "dlq peek: continue after this token (printed as \"more: --after N\")")
	var lim struct {
		weight, sendRate, sendBurst, recvRate, recvBurst float64
		maxInFlight, backlog                             int
	}
	fs.Float64Var(&lim.weight, "weight", 0, "tenant weight (fair-share multiplier)")
	fs.IntVar(&lim.maxInFlight, "max-in-flight", 0, "tenant in-flight cap")
	fs.Float64Var(&lim.sendRate, "send-rate", 0, "tenant send rate, messages/s")
	fs.Float64Var(&lim.sendBurst, "send-burst", 0, "tenant send burst")
	fs.Float64Var(&lim.recvRate, "receive-rate", 0, "tenant receive rate, messages/s")
	fs.Float64Var(&lim.recvBurst, "receive-burst", 0, "tenant receive burst")
	fs.IntVar(&lim.backlog, "backlog-target", 0, "tenant backlog target (backpressure)")
	pos, err := cmdkit.ParseFlags(fs, rest)
	if err != nil {
		return err
	}
	k.c = cmdkit.NewSQS(k.endpoint, k.region, env)
	k.admin = &adminClient{base: adminURL, token: *adminToken, region: k.region, env: env, hc: &http.Client{Timeout: 30 * time.Second}}
	need := func(n int, what string) error {
		if len(pos) < n {
			return fmt.Errorf("%s %s: missing %s", cmd, sub, what)
		}
		return nil
	}
	switch cmd + " " + sub {
	case "queues list", "stats ":
		return k.list(ctx, *prefix)
	case "queues create":
		if err := need(1, "NAME"); err != nil {
			return err
		}
		a, err := kvs(attrs)
		if err != nil {
			return err
		}
		if *fifo {
			a["FifoQueue"] = "true"
		}
		out, err := k.c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(pos[0]), Attributes: a})
		if err != nil {
			return err
		}
		return k.print(map[string]string{"QueueUrl": *out.QueueUrl}, *out.QueueUrl)
	case "queues delete":
		if err := need(1, "NAME"); err != nil {
			return err
		}
		u, err := k.url(ctx, pos[0])
		if err != nil {
			return err
		}
		_, err = k.c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: u})
		return err
	case "queues attrs":
		if err := need(1, "NAME"); err != nil {
			return err
		}
		u, err := k.url(ctx, pos[0])
		if err != nil {
			return err
		}
		out, err := k.c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: u, AttributeNames: []types.QueueAttributeName{"All"}})
		if err != nil {
			return err
		}
		if k.json {
			return cmdkit.WriteJSON(env.Stdout, out.Attributes)
		}
		var rows [][]string
		for _, n := range sortedKeys(out.Attributes) {
			rows = append(rows, []string{n, out.Attributes[n]})
		}
		cmdkit.Table(env.Stdout, []string{"ATTRIBUTE", "VALUE"}, rows)
		return nil
	case "queues set":
		if err := need(2, "NAME and KEY=VALUE"); err != nil {
			return err
		}
		a, err := kvs(append(pos[1:], attrs...))
		if err != nil {
			return err
		}
		u, err := k.url(ctx, pos[0])
		if err != nil {
			return err
		}
		_, err = k.c.SetQueueAttributes(ctx, &awssqs.SetQueueAttributesInput{QueueUrl: u, Attributes: a})
		return err
	case "send ":
		if err := need(2, "QUEUE and BODY"); err != nil {
			return err
		}
		u, err := k.url(ctx, pos[0])
		if err != nil {
			return err
		}
		in := &awssqs.SendMessageInput{QueueUrl: u, MessageBody: aws.String(pos[1])}
		if *group != "" {
			in.MessageGroupId = group
		}
		if *dedup != "" {
			in.MessageDeduplicationId = dedup
		}
		if *delay >= 0 {
			in.DelaySeconds = int32(*delay)
		}
		a, err := kvs(attrs)
		if err != nil {
			return err
		}
		if len(a) > 0 {
			in.MessageAttributes = map[string]types.MessageAttributeValue{}
			for n, v := range a {
				in.MessageAttributes[n] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
		}
		out, err := k.c.SendMessage(ctx, in)
		if err != nil {
			return err
		}
		return k.print(map[string]string{"MessageId": *out.MessageId}, *out.MessageId)
	case "receive ":
		if err := need(1, "QUEUE"); err != nil {
			return err
		}
		u, err := k.url(ctx, pos[0])
		if err != nil {
			return err
		}
		in := &awssqs.ReceiveMessageInput{QueueUrl: u, MaxNumberOfMessages: int32(*max), WaitTimeSeconds: int32(*wait),
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}}
		if *vis >= 0 {
			in.VisibilityTimeout = int32(*vis)
		}
		out, err := k.c.ReceiveMessage(ctx, in)
		if err != nil {
			return err
		}
		if *vis == 0 && !*del {
			// The SDK leaves VisibilityTimeout=0 out of the request, so make
			// the messages visible again explicitly.
			for _, m := range out.Messages {
				if _, err := k.c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: u, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
					return err
				}
			}
		}
		if err := k.printMessages(out.Messages); err != nil {
			return err
		}
		if *del {
			for _, m := range out.Messages {
				if _, err := k.c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: u, ReceiptHandle: m.ReceiptHandle}); err != nil {
					return err
				}
			}
		}
		return nil
	case "dlq list":
		return k.dlqList(ctx)
	case "dlq peek":
		if err := need(1, "DLQ"); err != nil {
			return err
		}
		if err := k.adminPeek(ctx, pos[0], f, *max, *after); err != nil {
			if !f.empty() || !strings.Contains(err.Error(), "admin API at") {
				return err
			}
			// No admin API (Amazon SQS, say): receive and release at once.
			fmt.Fprintln(env.Stderr, "sluice: admin API unreachable; peeking by receive (receive counts go up)")
			return k.dlqPeek(ctx, pos[0], *max)
		}
		return nil
	case "dlq purge":
		if err := need(1, "DLQ"); err != nil {
			return err
		}
		if !f.empty() {
			body, err := f.body(time.Now())
			if err != nil {
				return err
			}
			var out map[string]int
			if err := k.admin.do(ctx, "POST", "/api/queues/"+url.PathEscape(pos[0])+"/purge", body, &out); err != nil {
				return err
			}
			return k.print(out, fmt.Sprintf("purged %d messages", out["purged"]))
		}
		u, err := k.url(ctx, pos[0])
		if err != nil {
			return err
		}
		_, err = k.c.PurgeQueue(ctx, &awssqs.PurgeQueueInput{QueueUrl: u})
		return err
	case "dlq redrive":
		if err := need(1, "DLQ"); err != nil {
			return err
		}
		if !f.empty() {
			body, err := f.body(time.Now())
			if err != nil {
				return err
			}
			if *to != "" {
				body["to"] = *to
			}
			if *rate > 0 {
				body["rate"] = *rate
				var task map[string]string
				if err := k.admin.do(ctx, "POST", "/api/queues/"+url.PathEscape(pos[0])+"/redrive", body, &task); err != nil {
					return err
				}
				return k.print(task, "redrive started: "+task["task_handle"])
			}
			var out map[string]int
			if err := k.admin.do(ctx, "POST", "/api/queues/"+url.PathEscape(pos[0])+"/redrive", body, &out); err != nil {
				return err
			}
			return k.print(out, fmt.Sprintf("redrove %d messages", out["redriven"]))
		}
		return k.redrive(ctx, pos[0], *to, *rate)
	case "queues drop-before":
		if err := need(1, "QUEUE"); err != nil {
			return err
		}
		t, err := parseTime("before", *before, time.Now())
		if err != nil {
			return err
		}
		if t.IsZero() {
			return fmt.Errorf("queues drop-before: --before is required")
		}
		body := map[string]any{"before": t.UTC().Format(time.RFC3339Nano)}
		if f.tenant != "" {
			body["tenant"] = f.tenant
		}
		var out map[string]int
		if err := k.admin.do(ctx, "POST", "/api/queues/"+url.PathEscape(pos[0])+"/drop-before", body, &out); err != nil {
			return err
		}
		return k.print(out, fmt.Sprintf("dropped %d messages sent before %s", out["dropped"], t.Format(time.RFC3339)))
	case "tenants ":
		if err := need(1, "QUEUE"); err != nil {
			return err
		}
		var ts []tenantRow
		if err := k.admin.do(ctx, "GET", fmt.Sprintf("/api/queues/%s/tenants?max=%d", url.PathEscape(pos[0]), tenantsMax(*max)), nil, &ts); err != nil {
			return err
		}
		return k.printTenants(ts)
	case "tenants show", "tenants set":
		if err := need(2, "QUEUE and TENANT"); err != nil {
			return err
		}
		path := "/api/queues/" + url.PathEscape(pos[0]) + "/tenants/" + url.PathEscape(pos[1])
		var t tenantRow
		if sub == "show" {
			if err := k.admin.do(ctx, "GET", path, nil, &t); err != nil {
				return err
			}
		} else {
			body := map[string]any{"weight": lim.weight, "max_in_flight": lim.maxInFlight, "send_rate": lim.sendRate, "send_burst": lim.sendBurst,
				"receive_rate": lim.recvRate, "receive_burst": lim.recvBurst, "backlog_target": lim.backlog}
			if err := k.admin.do(ctx, "PUT", path, body, &t); err != nil {
				return err
			}
		}
		return k.printTenants([]tenantRow{t})
	}
	return fmt.Errorf("unknown command %q (see sluice --help)", strings.TrimSpace(cmd+" "+sub))
}

func (k *clientCmd) print(v any, text string) error {
	if k.json {
		return cmdkit.WriteJSON(k.env.Stdout, v)
	}
	fmt.Fprintln(k.env.Stdout, text)
	return nil
}

type queueRow struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Visible     int    `json:"visible"`
	InFlight    int    `json:"in_flight"`
	Delayed     int    `json:"delayed"`
	OldestAgeS  int64  `json:"oldest_age_seconds,omitempty"`
	DeadLetter  string `json:"dead_letter_queue,omitempty"`
	RedriveFrom string `json:"sources,omitempty"`
}

func (k *clientCmd) rows(ctx context.Context, prefix string) ([]queueRow, error) {
	var rows []queueRow
	in := &awssqs.ListQueuesInput{MaxResults: aws.Int32(1000)}
	if prefix != "" {
		in.QueueNamePrefix = &prefix
	}
	for {
		out, err := k.c.ListQueues(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, u := range out.QueueUrls {
			a, err := k.c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{"All"}})
			if err != nil {
				continue // deleted meanwhile
			}
			atoi := func(n string) int { v, _ := strconv.Atoi(a.Attributes[n]); return v }
			r := queueRow{Name: u[strings.LastIndex(u, "/")+1:], URL: u, Visible: atoi("ApproximateNumberOfMessages"),
				InFlight: atoi("ApproximateNumberOfMessagesNotVisible"), Delayed: atoi("ApproximateNumberOfMessagesDelayed")}
			if rp := a.Attributes["RedrivePolicy"]; rp != "" {
				if i := strings.Index(rp, "arn:aws:sqs:"); i >= 0 {
					arn := rp[i:]
					arn = arn[:strings.IndexAny(arn, `"`)]
					r.DeadLetter = arn[strings.LastIndex(arn, ":")+1:]
				}
			}
			rows = append(rows, r)
		}
		if out.NextToken == nil {
			return rows, nil
		}
		in.NextToken = out.NextToken
	}
}

func (k *clientCmd) list(ctx context.Context, prefix string) error {
	rows, err := k.rows(ctx, prefix)
	if err != nil {
		return err
	}
	if k.json {
		if rows == nil {
			rows = []queueRow{}
		}
		return cmdkit.WriteJSON(k.env.Stdout, rows)
	}
	var out [][]string
	for _, r := range rows {
		out = append(out, []string{r.Name, strconv.Itoa(r.Visible), strconv.Itoa(r.InFlight), strconv.Itoa(r.Delayed), dash(r.DeadLetter)})
	}
	cmdkit.Table(k.env.Stdout, []string{"QUEUE", "VISIBLE", "IN FLIGHT", "DELAYED", "DEAD-LETTER QUEUE"}, out)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (k *clientCmd) dlqList(ctx context.Context) error {
	rows, err := k.rows(ctx, "")
	if err != nil {
		return err
	}
	sources := map[string][]string{}
	for _, r := range rows {
		if r.DeadLetter != "" {
			sources[r.DeadLetter] = append(sources[r.DeadLetter], r.Name)
		}
	}
	var dlqs []queueRow
	for _, r := range rows {
		if s := sources[r.Name]; len(s) > 0 {
			r.RedriveFrom = strings.Join(s, ",")
			dlqs = append(dlqs, r)
		}
	}
	if k.json {
		if dlqs == nil {
			dlqs = []queueRow{}
		}
		return cmdkit.WriteJSON(k.env.Stdout, dlqs)
	}
	var out [][]string
	for _, r := range dlqs {
		out = append(out, []string{r.Name, strconv.Itoa(r.Visible), strconv.Itoa(r.InFlight), r.RedriveFrom})
	}
	cmdkit.Table(k.env.Stdout, []string{"DEAD-LETTER QUEUE", "MESSAGES", "IN FLIGHT", "SOURCES"}, out)
	return nil
}

// dlqPeek receives with a zero visibility timeout, so the messages stay
// available (their receive count still goes up, as on SQS).
func (k *clientCmd) dlqPeek(ctx context.Context, name string, max int) error {
	u, err := k.url(ctx, name)
	if err != nil {
		return err
	}
	out, err := k.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: u, MaxNumberOfMessages: int32(max),
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
	if err != nil {
		return err
	}
	for _, m := range out.Messages {
		if _, err := k.c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: u, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			return err
		}
	}
	return k.printMessages(out.Messages)
}

type msgRow struct {
	MessageID     string            `json:"message_id"`
	Body          string            `json:"body"`
	ReceiptHandle string            `json:"receipt_handle"`
	Attributes    map[string]string `json:"attributes,omitempty"`
}

func (k *clientCmd) printMessages(ms []types.Message) error {
	if k.json {
		rows := []msgRow{}
		for _, m := range ms {
			rows = append(rows, msgRow{MessageID: *m.MessageId, Body: *m.Body, ReceiptHandle: *m.ReceiptHandle, Attributes: m.Attributes})
		}
		return cmdkit.WriteJSON(k.env.Stdout, rows)
	}
	var rows [][]string
	for _, m := range ms {
		sent := ""
		if ts, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64); err == nil {
			sent = time.UnixMilli(ts).UTC().Format(time.RFC3339)
		}
		body := strings.ReplaceAll(*m.Body, "\n", `\n`)
		if len(body) > 60 {
			body = body[:57] + "..."
		}
		rows = append(rows, []string{*m.MessageId, m.Attributes["ApproximateReceiveCount"], sent, body})
	}
	cmdkit.Table(k.env.Stdout, []string{"MESSAGE ID", "RECEIVES", "SENT", "BODY"}, rows)
	return nil
}

func (k *clientCmd) redrive(ctx context.Context, dlq, to string, rate int) error {
	src, err := k.arn(ctx, dlq)
	if err != nil {
		return err
	}
	in := &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(src)}
	if to != "" {
		dst, err := k.arn(ctx, to)
		if err != nil {
			return err
		}
		in.DestinationArn = aws.String(dst)
	}
	if rate > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(int32(rate))
	}
	out, err := k.c.StartMessageMoveTask(ctx, in)
	if err != nil {
		return err
	}
	return k.print(map[string]string{"TaskHandle": *out.TaskHandle}, "redrive started: "+*out.TaskHandle)
}

func (k *clientCmd) arn(ctx context.Context, name string) (string, error) {
	u, err := k.url(ctx, name)
	if err != nil {
		return "", err
	}
	a, err := k.c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: u, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil {
		return "", err
	}
	arn := a.Attributes["QueueArn"]
	if arn == "" {
		return "", errors.New("server returned no QueueArn")
	}
	return arn, nil
}

// tenantsMax is how many tenants `sluice tenants` lists: --max when set
// above its default of 1, else 20.
func tenantsMax(n int) int {
	if n <= 1 {
		return 20
	}
	return n
}
