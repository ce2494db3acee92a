package admin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardSignIn: in Chromium, on a server with principals, the
// dashboard asks who is there; team a signs in with its access key and
// sees only its own queues and topics; team b's queue page, opened by
// its URL, is not found; another site's page that posts a purge to the
// admin address in team a's browser changes nothing; signing out ends
// the session (the API answers 401 again, the sign-in form is back).
func TestDashboardSignIn(t *testing.T) {
	exe := chromium(t)
	p := setupPrincipals(t)
	bctx := browser(t, exe)

	if err := chromedp.Do(bctx, chromedp.Navigate(p.srv.URL+"/ui/"), chromedp.WaitVisible(`#signin`)); err != nil {
		t.Fatalf("the dashboard without a session: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.SendKeys(`#signin-key`, "AKIDTEAMA"), chromedp.SendKeys(`#signin-secret`, "not-the-secret"),
		chromedp.Click(`#signin-submit`)); err != nil {
		t.Fatalf("a wrong secret: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById('signin-error').textContent !== ''`)); err != nil {
		t.Fatalf("a wrong secret: %v", err)
	}
	if msg, _ := chromedp.Run(bctx, chromedp.Text(`#signin-error`)); !strings.Contains(msg, "not right") {
		t.Errorf("a wrong secret says %q", msg)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('signin-secret').value = ''`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.SendKeys(`#signin-secret`, "secret-a"),
		chromedp.Click(`#signin-submit`), chromedp.WaitVisible(`#queues tr[data-queue="a-q"]`)); err != nil {
		t.Fatalf("signing in as team a: %v", err)
	}
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#queues tr[data-queue]')].map(r => r.dataset.queue).join(' ')`))
	if err != nil || rows != "a-dlq a-q" {
		t.Errorf("team a's queues page lists %q (%v), want a-dlq a-q", rows, err)
	}
	if me, _ := chromedp.Run(bctx, chromedp.Text(`#whoami`)); !strings.Contains(me, "team-a") {
		t.Errorf("the header says %q, want team-a signed in", me)
	}
	// The session's cookie is not for scripts.
	if ck, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.cookie`)); strings.Contains(ck, "sluice_session") {
		t.Errorf("the page's script reads the session cookie: %q", ck)
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(p.srv.URL+"/ui/#/topics"), chromedp.WaitVisible(`#topics tr[data-topic="a-t"]`)); err != nil {
		t.Fatalf("team a's topics page: %v", err)
	}
	if topics, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#topics tr[data-topic]')].map(r => r.dataset.topic).join(' ')`)); err != nil || topics != "a-t" {
		t.Errorf("team a's topics page lists %q (%v), want a-t", topics, err)
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(p.srv.URL+"/ui/?other#/queue/b-q")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById('status').textContent.includes('does not exist')`)); err != nil {
		status, _ := chromedp.Run(bctx, chromedp.Text(`#status`))
		t.Fatalf("team b's queue page by its URL: %v (status %q), want not found", err, status)
	}

	// Another site's page, open in the same browser, posts a purge of team
	// a's dead-letter queue (a form: no script of another origin can send
	// JSON or read the session's CSRF token). Its empty body, if the purge
	// were taken, would purge everything.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		// The form posts into a frame, so that this page stays to say when
		// the answer came.
		fmt.Fprintf(w, `<iframe name="sink" onload="if (window.sent) window.answered = true"></iframe>`+
			`<form id="f" method="POST" action="%s/api/queues/a-dlq/purge" enctype="text/plain" target="sink"></form>`+
			`<script>window.sent = true; document.getElementById('f').submit()</script>`, p.srv.URL)
	}))
	defer evil.Close()
	// From another site (localhost is not 127.0.0.1: the SameSite cookie
	// stays home), and from another port of the same site (the cookie
	// goes; the Origin, the content type and the missing CSRF token do not).
	for _, from := range []string{strings.Replace(evil.URL, "127.0.0.1", "localhost", 1), evil.URL} {
		before := p.refusals.Load()
		if err := chromedp.Do(bctx, chromedp.Navigate(from)); err != nil {
			t.Fatalf("the forged post from %s: %v", from, err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`window.answered === true`)); err != nil {
			t.Fatalf("the forged post from %s: no answer came: %v", from, err)
		}
		if p.refusals.Load() == before {
			t.Errorf("the forged post from %s was not refused", from)
		}
		if n := visibleIn(t, p.b, "a-dlq"); n != "3" {
			t.Fatalf("a-dlq holds %s messages after the forged purge from %s, want 3", n, from)
		}
	}

	// Sign out: the session ends on the server, not only in the page.
	if err := chromedp.Do(bctx, chromedp.Navigate(p.srv.URL+"/ui/"), chromedp.WaitVisible(`#queues tr[data-queue="a-q"]`),
		chromedp.Click(`#signout`), chromedp.WaitVisible(`#signin`)); err != nil {
		t.Fatalf("signing out: %v", err)
	}
	status, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`fetch('/api/queues', {headers: {'X-Sluice-UI': '1'}}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusUnauthorized {
		t.Errorf("the API after signing out: %v (%v), want 401", status, err)
	}
}
