package sns_test

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicemq/sluice/internal/broker"
	"github.com/sluicemq/sluice/internal/sqs/sqstest"
)

// TestSignedEnvelopes: a standard topic with SignatureVersion 1 or 2
// signs its envelopes as SNS does; the signature verifies, over SNS's
// canonical string, with the certificate the server serves at the
// SigningCertURL's path, and fails once the message is changed. A topic
// without SignatureVersion writes no signature.
func TestSignedEnvelopes(t *testing.T) {
	base, _ := sqstest.Serve(t, broker.Config{Dir: t.TempDir()})
	creds := credentials.NewStaticCredentialsProvider("AKID", "secret", "")
	sn := awssns.New(awssns.Options{Region: "us-east-1", BaseEndpoint: aws.String(base), Credentials: creds})
	sq := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(base), Credentials: creds})
	for _, version := range []string{"1", "2", ""} {
		name := "signed-v" + version
		attrs := map[string]string{}
		if version != "" {
			attrs["SignatureVersion"] = version
		} else {
			name = "unsigned"
		}
		ct, err := sn.CreateTopic(ctx, &awssns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		qurl, qarn := queue(t, sq, name)
		if _, err := sn.Subscribe(ctx, &awssns.SubscribeInput{TopicArn: ct.TopicArn, Protocol: aws.String("sqs"), Endpoint: &qarn}); err != nil {
			t.Fatal(err)
		}
		if _, err := sn.Publish(ctx, &awssns.PublishInput{TopicArn: ct.TopicArn, Message: aws.String("caf\u00e9 <&> \"quoted\"\nline"), Subject: aws.String("s")}); err != nil {
			t.Fatal(err)
		}
		m := receiveN(t, sq, qurl, 1)[0]
		var env map[string]string
		if err := json.Unmarshal([]byte(*m.Body), &env); err != nil {
			t.Fatal(err)
		}
		if version == "" {
			if env["Signature"] != "" || env["SigningCertURL"] != "" || env["SignatureVersion"] != "" {
				t.Fatalf("a topic without SignatureVersion signed: %v", env)
			}
			continue
		}
		if env["SignatureVersion"] != version {
			t.Fatalf("SignatureVersion %q, want %q", env["SignatureVersion"], version)
		}
		certURL, err := url.Parse(env["SigningCertURL"])
		if err != nil || !strings.HasPrefix(env["SigningCertURL"], "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-") {
			t.Fatalf("SigningCertURL %q", env["SigningCertURL"])
		}
		resp, err := http.Get(base + certURL.Path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		block, _ := pem.Decode(raw)
		if resp.StatusCode != 200 || block == nil {
			t.Fatalf("the certificate at %s: %d %q", certURL.Path, resp.StatusCode, raw)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		verify := func(env map[string]string) error {
			var canonical strings.Builder
			for _, k := range []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"} {
				if v, ok := env[k]; ok {
					canonical.WriteString(k + "\n" + v + "\n")
				}
			}
			sig, err := base64.StdEncoding.DecodeString(env["Signature"])
			if err != nil {
				return err
			}
			h, sum := crypto.SHA1, sha1Sum(canonical.String())
			if version == "2" {
				h, sum = crypto.SHA256, sha256Sum(canonical.String())
			}
			return rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), h, sum, sig)
		}
		if err := verify(env); err != nil {
			t.Fatalf("version %s: the signature does not verify: %v", version, err)
		}
		env["Message"] += "!"
		if verify(env) == nil {
			t.Fatalf("version %s: a changed message verifies", version)
		}
	}
	for _, p := range []string{"/SimpleNotificationService-00000000000000000000000000000000.pem", "/SimpleNotificationService-../x.pem"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

func sha1Sum(s string) []byte {
	d := sha1.Sum([]byte(s))
	return d[:]
}

func sha256Sum(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}
