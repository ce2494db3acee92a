package sigv4_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sluicemq/sluice/internal/sigv4"
)

// signed is a request the SDK's signer signed with secret, at when, for
// region and service.
func signed(t testing.TB, secret, region, service string, when time.Time, body []byte) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	r.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), service, region, when); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestVerifyKeepsSigningKeys: a principal's signing keys are kept by
// scope, and a kept key changes no verdict: the same requests verify, or
// fail, the first time and every time after, across days, regions and
// services, more of them than are kept.
func TestVerifyKeepsSigningKeys(t *testing.T) {
	p := &sigv4.Principal{AccessKeyID: "AKIDTEST", SecretAccessKey: "the-secret"}
	other := &sigv4.Principal{AccessKeyID: "AKIDTEST", SecretAccessKey: "another-secret"}
	body := []byte(`{"QueueNamePrefix":"q"}`)
	day := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	type scope struct {
		when            time.Time
		region, service string
	}
	var scopes []scope
	for d := range 3 {
		for _, region := range []string{"us-east-1", "eu-west-1"} {
			for _, service := range []string{"sqs", "sns"} {
				scopes = append(scopes, scope{day.AddDate(0, 0, d), region, service})
			}
		}
	}
	for round := range 3 {
		for _, sc := range scopes {
			what := fmt.Sprintf("round %d, %s %s %s", round, sc.when.Format("20060102"), sc.region, sc.service)
			r := signed(t, "the-secret", sc.region, sc.service, sc.when, body)
			sig, err := sigv4.Parse(r)
			if err != nil || sig == nil {
				t.Fatalf("%s: parse: %v", what, err)
			}
			if !sig.Verify(r, body, p) {
				t.Errorf("%s: a good signature does not verify", what)
			}
			if sig.Verify(r, append([]byte{' '}, body...), p) {
				t.Errorf("%s: a changed body verifies", what)
			}
			if sig.Verify(r, body, other) {
				t.Errorf("%s: another secret verifies", what)
			}
			bad := signed(t, "another-secret", sc.region, sc.service, sc.when, body)
			if badSig, err := sigv4.Parse(bad); err != nil || badSig.Verify(bad, body, p) {
				t.Errorf("%s: a signature with another secret verifies (%v)", what, err)
			}
		}
	}
}

// BenchmarkVerify: one signed SendMessageBatch-sized request verified
// again and again (the body's hash, the canonical request and the
// signature; the signing key is kept after the first).
func BenchmarkVerify(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 11<<10)
	when := time.Now()
	r := signed(b, "the-secret", "us-east-1", "sqs", when, body)
	sig, err := sigv4.Parse(r)
	if err != nil || sig == nil {
		b.Fatal(err)
	}
	p := &sigv4.Principal{AccessKeyID: "AKIDTEST", SecretAccessKey: "the-secret"}
	b.ReportAllocs()
	for b.Loop() {
		if !sig.Verify(r, body, p) {
			b.Fatal("does not verify")
		}
	}
}
