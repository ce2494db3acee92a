package admin_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/clock"
	st "github.com/sluicemq/sluice/sluicetype"
)

var (
	screenshot       = flag.String("screenshot", "", "write the dashboard screenshot to this file (docs/dashboard.png)")
	topicsScreenshot = flag.String("topics-screenshot", "", "write the topics page's screenshot to this file")
)

// chromium finds Debian's Chromium; without it the test fails, unless
// SLUICE_SKIP_CLIENT_TESTS=1 says missing clients may be skipped.
func chromium(t *testing.T) string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("SLUICE_SKIP_CLIENT_TESTS") == "1" {
		t.Skip("chromium not installed (apt-get install chromium); skipped because SLUICE_SKIP_CLIENT_TESTS=1")
	}
	t.Fatal("chromium not installed: apt-get install chromium (or set SLUICE_SKIP_CLIENT_TESTS=1 to skip)")
	return ""
}

// browser starts headless Chromium for the test; it ends with the test.
func browser(t *testing.T, exe string) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("headless", true), chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	bctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(func() { cancel(); cancelBrowser(); cancelAlloc() })
	return bctx
}

// TestDashboardShowsUnreadable: when messages were dropped because their
// bodies could not be read back, the dashboard says so in a banner on
// every page and shows which queues lost them.
func TestDashboardShowsUnreadable(t *testing.T) {
	exe := chromium(t)
	_, srv, lost := setupDamaged(t)
	bctx := browser(t, exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(`#queues tr[data-queue="big"]`),
		chromedp.WaitVisible(`#unreadable`)); err != nil {
		t.Fatalf("queues page: %v", err)
	}
	banner, err := chromedp.Run(bctx, chromedp.Text(`#unreadable`))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d messages could not be read back from disk and were dropped.", lost); !strings.HasPrefix(banner, want) ||
		!strings.Contains(banner, "sluice verify") {
		t.Fatalf("banner %q, want it to start %q and name sluice verify", banner, want)
	}
	for q, want := range map[string]int{"big": lost, "small": 0} {
		got, err := chromedp.Run(bctx, chromedp.Text(`#queues tr[data-queue="`+q+`"] td.unreadable`))
		if err != nil || got != fmt.Sprint(want) {
			t.Errorf("%s shows %q unreadable (%v), want %d", q, got, err, want)
		}
	}
	// The queue's page: the banner, and the queue's count on a card.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/?q=big#/queue/big"), chromedp.WaitVisible(`#tenants`)); err != nil {
		t.Fatalf("queue page: %v", err)
	}
	card, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll('.card')].
		filter(c => c.querySelector('.k').textContent === 'unreadable').map(c => c.querySelector('.v').textContent).join()`))
	if err != nil || card != fmt.Sprint(lost) {
		t.Errorf("big's unreadable card %q (%v), want %d", card, err, lost)
	}
	if hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById('unreadable').hidden`)); err != nil || hidden {
		t.Errorf("no banner on the queue's page (hidden %v, %v)", hidden, err)
	}
}

// TestDashboardInChromium drives the dashboard in headless Chromium: the
// page loads, a queue appears after a send, and a dead-letter message is
// redriven to its source with a click.
func TestDashboardInChromium(t *testing.T) {
	exe := chromium(t)
	b, srv, adm := setupAdmin(t)
	dlq, _ := b.CreateQueue(ctx, "orders-dlq", nil, nil)
	b.CreateQueue(ctx, "orders", map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, dlq.ARN)}, nil)
	send(t, b, "orders", "acme", 3)
	send(t, b, "orders", "globex", 1)
	for i := 0; i < 2; i++ { // the second receive moves all four to the DLQ (maxReceiveCount 1)
		b.Receive(ctx, "orders", st.ReceiveInput{MaxMessages: 10, VisibilityTimeout: new(int)})
	}
	if a, _ := b.GetQueueAttributes("orders-dlq", []string{"ApproximateNumberOfMessages"}); a["ApproximateNumberOfMessages"] != "4" {
		t.Fatalf("setup: dead-letter queue %v", a)
	}
	bctx := browser(t, exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(`#queues tr[data-queue="orders"]`)); err != nil {
		t.Fatalf("queues page: %v", err)
	}
	// A healthy store: no banner, and no queue lost a message.
	if hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById('unreadable').hidden`)); err != nil || !hidden {
		t.Fatalf("the unreadable banner shows on a healthy store (hidden %v, %v)", hidden, err)
	}
	if lost, err := chromedp.Run(bctx, chromedp.Text(`#queues tr[data-queue="orders"] td.unreadable`)); err != nil || lost != "0" {
		t.Fatalf("orders shows %q unreadable (%v), want 0", lost, err)
	}
	rows, err := chromedp.Run(bctx, chromedp.Text(`#queues tbody`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rows, "orders-dlq") {
		t.Fatalf("queues page rows: %q", rows)
	}
	// A queue appears after a send.
	b.CreateQueue(ctx, "fresh", nil, nil)
	send(t, b, "fresh", "zeta", 1)
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(`#queues tr[data-queue="fresh"]`)); err != nil {
		t.Fatalf("after a send: %v", err)
	}
	visible, err := chromedp.Run(bctx, chromedp.Text(`#queues tr[data-queue="fresh"] td.visible`))
	if err != nil {
		t.Fatal(err)
	}
	if visible != "1" {
		t.Fatalf("fresh shows %q visible, want 1", visible)
	}
	if *screenshot != "" {
		// A queue with a history to show: a noisy tenant's backlog grows
		// while quiet ones keep up.
		b.CreateQueue(ctx, "payments", map[string]string{"TenantMaxInFlight": "5", "SidelineAgeSeconds": "60"}, nil)
		for i := 0; i < 24; i++ {
			send(t, b, "payments", "bigcorp", 20+i*3)
			send(t, b, "payments", fmt.Sprint("shop-", i%5), 2)
			if ms, _ := b.Receive(ctx, "payments", st.ReceiveInput{MaxMessages: 10}); len(ms) > 0 {
				b.Delete(ctx, "payments", ms[0].ReceiptHandle)
			}
			adm.Sample()
		}
		if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/?q=payments#/queue/payments"), chromedp.WaitVisible(`#tenants`), chromedp.Sleep(200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100: PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Clean(*screenshot), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	adm.Sample() // a point for the charts' read-out
	// Redrive the dead-letter queue with a click.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/?q=dlq#/queue/orders-dlq")); err != nil {
		t.Fatalf("dead-letter page: %v", err)
	}
	wctx, wcancel := context.WithTimeout(bctx, 15*time.Second)
	err = chromedp.Do(wctx, chromedp.WaitVisible(`#messages td.msg`))
	wcancel()
	if err != nil {
		html, _ := chromedp.Run(bctx, chromedp.Text(`body`))
		t.Fatalf("dead-letter page: %v; page text: %s", err, html)
	}
	var body string
	body, err = chromedp.Run(bctx, chromedp.Text(`#messages tbody`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "acme body 0") {
		t.Fatalf("dead-letter messages: %q", body)
	}
	// The depth chart has labelled axes and reads out the sample under
	// the pointer.
	readout, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => {
		const svg = document.querySelector('.chart svg.plot');
		const r = svg.getBoundingClientRect();
		svg.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.right - 20, clientY: r.top + r.height / 2}));
		return [...svg.querySelectorAll('text.label')].map(t => t.textContent).join('|') + '|' +
			svg.querySelector('text.readout-text').textContent;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(readout, "messages|time (local)|") || !strings.HasSuffix(readout, " messages") {
		t.Fatalf("depth chart labels and read-out: %q", readout)
	}
	// The click starts a move task: the page says so once the admin API
	// has answered, and the test then waits for the task to end.
	if err := chromedp.Do(bctx, chromedp.Click(`#redrive`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById('action').textContent.startsWith('Redrive started')`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("after the click: %v", err)
	}
	tasks, err := b.ListMoveTasks(ctx, dlq.ARN, 1)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("move tasks: %+v %v", tasks, err)
	}
	if tk := tasks[0]; tk.Status == "RUNNING" {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if tasks[0], err = b.WaitMoveTask(wctx, tk.TaskHandle); err != nil {
			t.Fatal(err)
		}
	}
	if tasks[0].Status != "COMPLETED" || tasks[0].ApproximateNumberOfMessagesMoved != 4 {
		t.Fatalf("move task: %+v", tasks[0])
	}
	a, _ := b.GetQueueAttributes("orders-dlq", []string{"ApproximateNumberOfMessages"})
	o, _ := b.GetQueueAttributes("orders", []string{"ApproximateNumberOfMessages"})
	if a["ApproximateNumberOfMessages"] != "0" || o["ApproximateNumberOfMessages"] != "4" {
		t.Fatalf("after the move task: dlq %v, orders %v", a, o)
	}
	// The page shows the emptied dead-letter queue.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/?q=after#/queue/orders-dlq"), chromedp.WaitVisible(`#messages`)); err != nil {
		t.Fatal(err)
	}
	after, err := chromedp.Run(bctx, chromedp.Text(`#messages tbody`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(after, "No messages.") {
		t.Fatalf("dead-letter page after the redrive: %q", after)
	}
}

// TestDashboardTopicsInChromium drives the topics page in headless
// Chromium: it says so when there are no topics; then it lists a topic
// with its figures and both subscriptions with their queues' backlogs,
// marks the subscription whose queue holds old messages (its consumers
// are away) and not the one whose consumers keep up, and shows a
// client's names as text, never as markup.
func TestDashboardTopicsInChromium(t *testing.T) {
	exe := chromium(t)
	clk := clock.NewFake(time.Now())
	b, srv, _ := setupClock(t, clk)
	bctx := browser(t, exe)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui/#/topics"), chromedp.WaitVisible(`#topics`)); err != nil {
		t.Fatalf("topics page: %v", err)
	}
	if empty, err := chromedp.Run(bctx, chromedp.Text(`#topics tbody`)); err != nil || empty != "No topics yet." {
		t.Fatalf("topics page without topics: %q (%v)", empty, err)
	}

	arn := map[string]string{}
	for _, name := range []string{"billing", "audit"} {
		q, err := b.CreateQueue(ctx, name, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		arn[name] = q.ARN
	}
	if _, _, err := b.CreateTopic(ctx, st.TopicInfo{Name: "orders", Subs: map[string]st.Subscription{
		"s-billing": {Protocol: "sqs", Endpoint: arn["billing"], Attrs: map[string]string{"RawMessageDelivery": "true"}},
		"s-audit":   {Protocol: "sqs", Endpoint: arn["audit"]},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, "orders", []broker.PublishInput{{ID: "p1", Message: "order 1"}, {ID: "p2", Message: "order 2"},
		{ID: "p3", Message: "order 3"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the publishes delivered", func() bool {
		f, err := b.TopicFigures("orders")
		return err == nil && f.Delivered == 6 && f.Held == 0
	})
	// Billing's consumers take everything; audit's are away for ten
	// minutes.
	for {
		ms, err := b.Receive(ctx, "billing", st.ReceiveInput{MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if err := b.Delete(ctx, "billing", m.ReceiptHandle); err != nil {
				t.Fatal(err)
			}
		}
	}
	clk.Advance(10 * time.Minute)

	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(`table.subscriptions[data-topic="orders"] tr[data-queue="audit"]`)); err != nil {
		t.Fatalf("topics page after a publish: %v", err)
	}
	// One read of the page, so a refresh cannot land between two.
	got, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`(() => {
		const topic = document.querySelector('#topics tr[data-topic="orders"]');
		const subs = document.querySelector('table.subscriptions[data-topic="orders"]');
		const out = {
			published: topic.querySelector('td.published').textContent,
			held: topic.querySelector('td.held').textContent,
			slowest: topic.querySelector('td.slowest').textContent,
			slowestAge: topic.querySelector('td.oldest').textContent + ' ' + topic.querySelector('td.oldest').className,
			rows: String(subs.querySelectorAll('tbody tr').length),
		};
		for (const q of ['audit', 'billing']) {
			const r = subs.querySelector('tr[data-queue="' + q + '"]');
			out[q] = r.querySelector('td.visible').textContent + ' visible, ' + r.querySelector('td.in-flight').textContent +
				' in flight, oldest ' + r.querySelector('td.oldest').textContent + (r.classList.contains('behind') ? ', behind' : '') +
				', ' + r.cells[1].textContent;
		}
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"published": "3", "held": "0", "slowest": "audit", "slowestAge": "10.0m num oldest bad", "rows": "2",
		"audit":   "3 visible, 0 in flight, oldest 10.0m, behind, envelope",
		"billing": "0 visible, 0 in flight, oldest 0s, raw",
	} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
	if *topicsScreenshot != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100: PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Clean(*topicsScreenshot), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A client names a topic, and a subscription's queue, with markup.
	const hostile = `x"><img src=x onerror="document.title='owned'">`
	if _, _, err := b.CreateTopic(ctx, st.TopicInfo{Name: hostile, Subs: map[string]st.Subscription{
		"s-x": {Protocol: "sqs", Endpoint: strings.TrimSuffix(arn["audit"], "audit") + hostile}}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Reload(), chromedp.WaitVisible(`#topics tr:nth-child(2)`)); err != nil {
		t.Fatalf("topics page with a hostile name: %v", err)
	}
	name, _ := json.Marshal(hostile)
	got, err = chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`(() => {
		const name = `+string(name)+`;
		const topic = [...document.querySelectorAll('#topics tbody tr')].find(r => r.dataset.topic === name);
		const subs = [...document.querySelectorAll('table.subscriptions')].find(t => t.dataset.topic === name);
		const sub = subs && subs.querySelector('tbody tr');
		return {
			topic: topic ? topic.cells[0].textContent : 'absent',
			queue: sub ? sub.dataset.queue + ' | ' + sub.cells[0].textContent + ' | ' + sub.querySelector('td.missing').textContent : 'absent',
			images: String(document.querySelectorAll('img').length),
			title: document.title,
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"topic":  hostile,
		"queue":  hostile + " | " + hostile + " | queue missing: deliveries refused",
		"images": "0", "title": "Sluice",
	} {
		if got[k] != want {
			t.Errorf("hostile names: %s: %q, want %q", k, got[k], want)
		}
	}
}
