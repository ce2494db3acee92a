package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/sluicemq/sluice/internal/cmdkit"
)

// adminClient talks to the admin API (--admin, SLUICE_ADMIN_ENDPOINT):
// tenants and their limits, the watermark, dead-letter tooling.
type adminClient struct {
	base  string
	token string // --admin-token, SLUICE_ADMIN_TOKEN
	// creds sign each request (SigV4) when there is no token: the caller
	// acts as the principal of its access key, on its own queues and
	// topics. Nil: requests go unsigned (a server with no credentials).
	creds aws.CredentialsProvider
	// env is where creds come from, looked up at the first request (not
	// for every command, most of which never call the admin API).
	env       cmdkit.Env
	credsDone bool
	region    string
	hc        *http.Client
}

// adminCredentials are the credentials the admin commands sign with
// when no token is given: the usual AWS chain as far as a command line
// needs it: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
// AWS_SESSION_TOKEN), else the profile (AWS_PROFILE, or the default one)
// of the shared config and credentials files. Nil when there are none.
func adminCredentials(ctx context.Context, env cmdkit.Env) aws.CredentialsProvider {
	if key := env.Getenv("AWS_ACCESS_KEY_ID"); key != "" {
		return credentials.NewStaticCredentialsProvider(key, env.Getenv("AWS_SECRET_ACCESS_KEY"), env.Getenv("AWS_SESSION_TOKEN"))
	}
	opts := []func(*config.LoadOptions) error{
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled), // not on a laptop's command line
	}
	if p := env.Getenv("AWS_PROFILE"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil || cfg.Credentials == nil {
		return nil
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil
	}
	return cfg.Credentials
}

// sign signs req, whose body is body, with the client's credentials.
func (a *adminClient) sign(ctx context.Context, req *http.Request, body []byte) error {
	c, err := a.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("admin API: no credentials to sign with: %w", err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	return v4.NewSigner().SignHTTP(ctx, c, req, hash, "sluice", a.region, time.Now())
}

func (a *adminClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	var raw []byte
	if in != nil {
		var err error
		if raw, err = json.Marshal(in); err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(a.base, "/")+path, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token == "" && !a.credsDone {
		a.creds, a.credsDone = adminCredentials(ctx, a.env), true
	}
	switch {
	case a.token != "":
		req.Header.Set("Authorization", "Bearer "+a.token)
	case a.creds != nil:
		if err := a.sign(ctx, req, raw); err != nil {
			return err
		}
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s: %w (is --admin right?)", a.base, err)
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("admin API at %s: unauthorized: pass the server's admin token with --admin-token or SLUICE_ADMIN_TOKEN, or AWS credentials of a principal of its credentials file (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)", a.base)
	}
	if resp.StatusCode >= 300 {
		var e struct{ Code, Message string }
		if json.Unmarshal(raw, &e) == nil && e.Code != "" {
			return fmt.Errorf("%s: %s", e.Code, e.Message)
		}
		return fmt.Errorf("admin API: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// filter is the dead-letter filter flags.
type filter struct {
	tenant, source, reason, since, until, contains string
}

func (f filter) empty() bool { return f == filter{} }

// parseTime accepts RFC 3339 or a duration ago ("90m": 90 minutes ago).
func parseTime(flagName, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s: %q is neither an RFC 3339 time nor a duration ago (like 2h)", flagName, v)
}

func (f filter) body(now time.Time) (map[string]any, error) {
	m := map[string]any{}
	for k, v := range map[string]string{"tenant": f.tenant, "source": f.source, "reason": f.reason, "contains": f.contains} {
		if v != "" {
			m[k] = v
		}
	}
	for k, v := range map[string]string{"since": f.since, "until": f.until} {
		t, err := parseTime(k, v, now)
		if err != nil {
			return nil, err
		}
		if !t.IsZero() {
			m[k] = t.UTC().Format(time.RFC3339Nano)
		}
	}
	return m, nil
}

func (f filter) query(now time.Time) (url.Values, error) {
	b, err := f.body(now)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	for k, v := range b {
		q.Set(k, fmt.Sprint(v))
	}
	return q, nil
}

type peeked struct {
	MessageID    string    `json:"message_id"`
	Body         string    `json:"body"`
	Tenant       string    `json:"tenant,omitempty"`
	Source       string    `json:"source_arn,omitempty"`
	Sent         time.Time `json:"sent"`
	ReceiveCount int       `json:"receive_count"`
	State        string    `json:"state"`
	Reason       string    `json:"reason,omitempty"`
	LastError    string    `json:"last_error,omitempty"`
}

func (k *clientCmd) adminPeek(ctx context.Context, queue string, f filter, max int, after string) error {
	q, err := f.query(time.Now())
	if err != nil {
		return err
	}
	q.Set("max", strconv.Itoa(max))
	if after != "" {
		q.Set("after", after)
	}
	var out struct {
		Messages []peeked
		Next     string
	}
	if err := k.admin.do(ctx, "GET", "/api/queues/"+url.PathEscape(queue)+"/messages?"+q.Encode(), nil, &out); err != nil {
		return err
	}
	if k.json {
		return cmdkit.WriteJSON(k.env.Stdout, out)
	}
	var rows [][]string
	for _, m := range out.Messages {
		src := m.Source
		if i := strings.LastIndexByte(src, ':'); i >= 0 {
			src = src[i+1:]
		}
		body := m.Body
		if len(body) > 60 {
			body = body[:57] + "..."
		}
		rows = append(rows, []string{m.Sent.Local().Format("2006-01-02 15:04:05"), dash(m.Tenant), dash(src), strconv.Itoa(m.ReceiveCount), dash(m.Reason), dash(m.LastError), body})
	}
	cmdkit.Table(k.env.Stdout, []string{"SENT", "TENANT", "SOURCE", "RECEIVES", "REASON", "LAST ERROR", "BODY"}, rows)
	if out.Next != "" {
		fmt.Fprintf(k.env.Stdout, "more: --after %s\n", out.Next)
	}
	return nil
}

type tenantRow struct {
	Name      string         `json:"name"`
	Ready     int            `json:"ready"`
	InFlight  int            `json:"in_flight"`
	Lanes     map[string]int `json:"lanes"`
	OldestAge time.Duration  `json:"oldest_age_ns"`
	Spilled   bool           `json:"spilled"`
	Capped    bool           `json:"capped"`
	Shards    []int          `json:"shards"`
	Limits    map[string]any `json:"limits,omitempty"`
	// The backlog mode: engaged since FreshFirstSince, the oldest of the
	// old side OldOldestAge old.
	FreshFirst      bool          `json:"fresh_first"`
	FreshFirstSince time.Time     `json:"fresh_first_since,omitzero"`
	OldOldestAge    time.Duration `json:"old_oldest_age_ns,omitempty"`
}

func (k *clientCmd) printTenants(ts []tenantRow) error {
	if k.json {
		return cmdkit.WriteJSON(k.env.Stdout, ts)
	}
	var rows [][]string
	for _, t := range ts {
		var lanes []string
		for _, l := range sortedKeys(t.Lanes) {
			lanes = append(lanes, fmt.Sprintf("%s=%d", l, t.Lanes[l]))
		}
		var state []string
		if t.FreshFirst {
			state = append(state, fmt.Sprintf("fresh first since %s (%d older behind, the oldest %s)",
				t.FreshFirstSince.Local().Format(time.TimeOnly), t.Lanes["backlog"], t.OldOldestAge.Round(time.Second)))
		}
		if t.Spilled {
			state = append(state, "over receive rate")
		}
		if t.Capped {
			state = append(state, "at cap")
		}
		lim := ""
		if len(t.Limits) > 0 {
			raw, _ := json.Marshal(t.Limits)
			lim = string(raw)
		}
		parts := make([]string, len(t.Shards))
		for i, p := range t.Shards {
			parts[i] = strconv.Itoa(p)
		}
		rows = append(rows, []string{dash(t.Name), strconv.Itoa(t.Ready), strconv.Itoa(t.InFlight), t.OldestAge.Round(time.Millisecond).String(),
			dash(strings.Join(lanes, " ")), dash(strings.Join(state, ", ")), strings.Join(parts, ","), dash(lim)})
	}
	cmdkit.Table(k.env.Stdout, []string{"TENANT", "READY", "IN FLIGHT", "OLDEST", "LANES", "STATE", "SHARDS", "OVERRIDES"}, rows)
	return nil
}
