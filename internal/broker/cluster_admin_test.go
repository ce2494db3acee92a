package broker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/sigv4"
)

// TestClusterAdminActsAsTheCaller: an admin request about a queue another
// node owns is forwarded there and answered for whom the node that took
// it found the caller to be: a principal's signed request, and a
// dashboard session (which lives on the node that took the sign-in
// only), reach the principal's own queue on another node and find the
// other principal's queue missing.
func TestClusterAdminActsAsTheCaller(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three NATS servers")
	}
	creds, err := sigv4.ParseCredentials([]byte(`{"principals": [
	  {"name": "team-a", "access_key_id": "AKIDTEAMA", "secret_access_key": "secret-a", "queues": ["a-*"]},
	  {"name": "team-b", "access_key_id": "AKIDTEAMB", "secret_access_key": "secret-b", "queues": ["b-*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nodes := startCluster(t, 3)
	urls := map[*clusterNode]string{}
	for _, n := range nodes {
		adm := admin.New(n.b, admin.Options{Logger: clusterLogger(t)})
		n.b.ServeForwarded("admin", admin.Authenticated(adm, &admin.Access{Credentials: creds}))
		srv := httptest.NewServer(admin.Guard(adm, admin.GuardOptions{Credentials: creds}))
		t.Cleanup(srv.Close)
		urls[n] = srv.URL
	}
	// One queue a team, and a node that owns neither (three nodes, two
	// queues: there is one, wherever placement put them), so that asking
	// it about them forwards.
	remote := map[string]string{"a": "a-queue", "b": "b-queue"} // team → its queue
	owners := map[*clusterNode]bool{}
	for _, name := range remote {
		if _, err := nodes[0].client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		owners[owner(t, nodes, name)] = true
	}
	var through *clusterNode
	for _, n := range nodes {
		if !owners[n] {
			through = n
			break
		}
	}
	via := urls[through]
	get := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	signed := func(path string) *http.Request {
		req, _ := http.NewRequest("GET", via+path, nil)
		sum := sha256.Sum256(nil)
		if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "AKIDTEAMA", SecretAccessKey: "secret-a"}, req,
			hex.EncodeToString(sum[:]), "sluice", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		return req
	}
	// Signed.
	if code, body := get(signed("/api/queues/" + remote["a"])); code != http.StatusOK || !strings.Contains(body, remote["a"]) {
		t.Errorf("team a's own queue %s (owned elsewhere), signed, through %s: %d %s", remote["a"], through.name, code, body)
	}
	if code, body := get(signed("/api/queues/" + remote["b"])); code != http.StatusNotFound {
		t.Errorf("team b's queue %s, asked by team a, signed: %d %s, want 404", remote["b"], code, body)
	}
	// A dashboard session, signed in on node 0.
	in, _ := http.NewRequest("POST", via+"/api/session", strings.NewReader(`{"access_key_id":"AKIDTEAMA","secret_access_key":"secret-a"}`))
	in.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(in)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "sluice_session" {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusOK || cookie == nil {
		t.Fatalf("signing in on %s: %s, cookie %v", through.name, resp.Status, cookie)
	}
	withSession := func(path string) *http.Request {
		req, _ := http.NewRequest("GET", via+path, nil)
		req.AddCookie(cookie)
		return req
	}
	code, body := get(withSession("/api/queues/" + remote["a"]))
	var q struct{ Name string }
	if json.Unmarshal([]byte(body), &q); code != http.StatusOK || q.Name != remote["a"] {
		t.Errorf("team a's own queue %s (owned elsewhere), in a session on %s: %d %s", remote["a"], through.name, code, body)
	}
	if code, body := get(withSession("/api/queues/" + remote["b"])); code != http.StatusNotFound {
		t.Errorf("team b's queue %s, in team a's session: %d %s, want 404", remote["b"], code, body)
	}
	// A caller's own claim to be someone is not taken from a client.
	req := withSession("/api/queues/" + remote["b"])
	req.Header.Set("X-Sluice-Admin-Caller", "operator")
	if code, body := get(req); code != http.StatusNotFound {
		t.Errorf("team b's queue, in team a's session claiming to be the operator: %d %s, want 404", code, body)
	}
}
