package admin_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	st "github.com/sluicemq/sluice/sluicetype"
)

var screenshot = flag.String("screenshot", "", "write the dashboard screenshot to this file (docs/dashboard.png)")

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
