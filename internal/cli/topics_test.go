package cli

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// receiveBodies receives from queue through the CLI (deleting) until n
// messages came, and returns their bodies in the order received.
func receiveBodies(t *testing.T, ep, queue string, n int) []string {
	t.Helper()
	var bodies []string
	deadline := time.Now().Add(20 * time.Second)
	for len(bodies) < n && time.Now().Before(deadline) {
		out, code := sluiceCmd(t, ep, "receive", queue, "--max", "10", "--wait", "1", "--delete", "--json")
		if code != 0 {
			t.Fatalf("receive %s: %s", queue, out)
		}
		var msgs []msgRow
		if err := json.Unmarshal([]byte(out), &msgs); err != nil {
			t.Fatalf("receive --json: %v\n%s", err, out)
		}
		for _, m := range msgs {
			bodies = append(bodies, m.Body)
		}
	}
	if len(bodies) != n {
		t.Fatalf("%s: %d messages %q, want %d", queue, len(bodies), bodies, n)
	}
	return bodies
}

// TestTopicCommands: a topic with two subscriptions (one raw and
// filtered, one enveloped with a dead-letter queue) set up, published to,
// listed and torn down through the CLI against a real server; the queues
// are read through the SQS side.
func TestTopicCommands(t *testing.T) {
	ep := startServer(t)
	run := func(args ...string) string {
		t.Helper()
		out, code := sluiceCmd(t, ep, args...)
		if code != 0 {
			t.Fatalf("sluice %v: code %d: %s", args, code, out)
		}
		return out
	}
	for _, q := range []string{"all", "reds", "all-dlq"} {
		run("queues", "create", q)
	}
	const topic = "arn:aws:sns:us-east-1:000000000000:orders"
	if out := run("topics", "create", "orders"); strings.TrimSpace(out) != topic {
		t.Fatalf("topics create: %q", out)
	}
	const filter = `{"color": ["red", "crimson", "scarlet", "vermilion"]}`
	allSub := strings.TrimSpace(run("topics", "subscribe", "orders", "all", "--dlq", "all-dlq"))
	var sub map[string]string
	if err := json.Unmarshal([]byte(run("topics", "subscribe", "orders", "reds", "--raw", "--filter", filter, "--json")), &sub); err != nil ||
		!strings.HasPrefix(sub["SubscriptionArn"], topic+":") || !strings.HasPrefix(allSub, topic+":") || sub["SubscriptionArn"] == allSub {
		t.Fatalf("subscribe: %q %v %v", allSub, sub, err)
	}
	redSub := sub["SubscriptionArn"]

	// Delivery is in publish order per subscription: had "blue" passed
	// the filter, it would be in reds before "red 2" is.
	for _, p := range [][]string{{"red 1", "red"}, {"blue", "blue"}, {"red 2", "crimson"}} {
		if out := run("topics", "publish", "orders", p[0], "--attr", "color="+p[1], "--subject", "news"); strings.Contains(out, "sequence") || len(strings.TrimSpace(out)) != 36 {
			t.Fatalf("topics publish: %q", out)
		}
	}
	if got := receiveBodies(t, ep, "reds", 2); !slices.Equal(sorted(got), []string{"red 1", "red 2"}) {
		t.Fatalf("the raw, filtered subscription got %q", got)
	}
	if out := run("receive", "reds", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("the raw, filtered subscription got more: %s", out)
	}
	var messages []string
	for _, body := range receiveBodies(t, ep, "all", 3) {
		var env struct{ Type, TopicArn, Subject, Message string }
		if err := json.Unmarshal([]byte(body), &env); err != nil || env.Type != "Notification" || env.TopicArn != topic || env.Subject != "news" {
			t.Fatalf("not the envelope: %v %q", err, body)
		}
		messages = append(messages, env.Message)
	}
	if !slices.Equal(sorted(messages), []string{"blue", "red 1", "red 2"}) {
		t.Fatalf("the enveloped subscription got %q", messages)
	}

	// Lists: the table, and --json.
	for _, args := range [][]string{{"topics"}, {"topics", "list"}} {
		if out := run(args...); !matches(`(?m)^orders +2 +`+regexp.QuoteMeta(topic)+`$`, out) {
			t.Fatalf("sluice %v:\n%s", args, out)
		}
	}
	var topics []topicRow
	if err := json.Unmarshal([]byte(run("topics", "--json")), &topics); err != nil || len(topics) != 1 ||
		topics[0] != (topicRow{Name: "orders", ARN: topic, Subscriptions: 2}) {
		t.Fatalf("topics --json: %v %+v", err, topics)
	}
	out := run("topics", "subscriptions", "orders")
	if !matches(`(?m)^`+regexp.QuoteMeta(redSub)+` +reds +raw +`+regexp.QuoteMeta(`{"color":["red","crimson","scarlet","...`)+` +- *$`, out) ||
		!matches(`(?m)^`+regexp.QuoteMeta(allSub)+` +all +envelope +- +all-dlq *$`, out) {
		t.Fatalf("topics subscriptions:\n%s", out)
	}
	var subs []subscriptionRow
	if err := json.Unmarshal([]byte(run("topics", "subscriptions", "orders", "--json")), &subs); err != nil || len(subs) != 2 {
		t.Fatalf("topics subscriptions --json: %v %+v", err, subs)
	}
	byQueue := map[string]subscriptionRow{}
	for _, s := range subs {
		byQueue[s.Queue] = s
	}
	if want := (subscriptionRow{ARN: redSub, Queue: "reds", Endpoint: "arn:aws:sqs:us-east-1:000000000000:reds", Raw: true,
		Filter: filter, FilterScope: "MessageAttributes"}); byQueue["reds"] != want {
		t.Fatalf("the raw subscription: %+v, want %+v", byQueue["reds"], want)
	}
	if want := (subscriptionRow{ARN: allSub, Queue: "all", Endpoint: "arn:aws:sqs:us-east-1:000000000000:all",
		DeadLetter: "arn:aws:sqs:us-east-1:000000000000:all-dlq"}); byQueue["all"] != want {
		t.Fatalf("the enveloped subscription: %+v, want %+v", byQueue["all"], want)
	}

	// FIFO: the sequence number.
	run("topics", "create", "events.fifo", "--fifo", "--content-dedup")
	var pub map[string]string
	if err := json.Unmarshal([]byte(run("topics", "publish", "events.fifo", "e1", "--group", "g", "--json")), &pub); err != nil ||
		pub["MessageId"] == "" || pub["SequenceNumber"] == "" {
		t.Fatalf("publish to a FIFO topic: %v %v", err, pub)
	}
	if out := run("topics", "publish", "events.fifo", "e2", "--group", "g", "--dedup", "d2"); !strings.Contains(out, "(sequence number ") {
		t.Fatalf("publish to a FIFO topic: %q", out)
	}

	// Errors: the server's code and message, a non-zero exit.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", "publish", "nope", "m"}, "NotFound: Topic does not exist"},
		{[]string{"topics", "subscribe", "orders", "all", "--filter", `{"a":[{"bogus":1}]}`}, "InvalidParameter"},
		{[]string{"topics", "publish", "orders"}, "topics publish: missing MESSAGE"},
		{[]string{"topics", "publish", "orders", "hello", "world"}, `unexpected argument "world"`},
		{[]string{"topics", "bogus"}, `unknown command "topics bogus"`},
	} {
		if out, code := sluiceCmd(t, ep, tc.args...); code == 0 || !strings.Contains(out, tc.want) {
			t.Fatalf("sluice %v: code %d, %q; want an error with %q", tc.args, code, out, tc.want)
		}
	}

	// Teardown.
	run("topics", "unsubscribe", redSub)
	if err := json.Unmarshal([]byte(run("topics", "subscriptions", "orders", "--json")), &subs); err != nil || len(subs) != 1 || subs[0].ARN != allSub {
		t.Fatalf("subscriptions after unsubscribe: %v %+v", err, subs)
	}
	run("topics", "delete", "orders")
	run("topics", "delete", "events.fifo")
	if out := run("topics", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("topics after the deletions: %s", out)
	}
	if out, code := sluiceCmd(t, ep, "topics", "subscriptions", "orders"); code == 0 || !strings.Contains(out, "NotFound") {
		t.Fatalf("subscriptions of a deleted topic: %d %s", code, out)
	}
}

func TestAbbreviateFilter(t *testing.T) {
	for _, tc := range []struct{ policy, scope, want string }{
		{"", "", "-"},
		{`{"a": ["b"]}`, "MessageAttributes", `{"a":["b"]}`},
		{`{"a": ["b"]}`, "MessageBody", `body:{"a":["b"]}`},
		{"{\"a\":\n  [\"" + strings.Repeat("é", 40) + "\"]}", "", `{"a":["` + strings.Repeat("é", 30) + "..."},
		{"not\n json", "", "not json"},
	} {
		if got := abbreviateFilter(tc.policy, tc.scope); got != tc.want {
			t.Errorf("abbreviateFilter(%q, %q) = %q, want %q", tc.policy, tc.scope, got, tc.want)
		}
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func matches(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
