package forward

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// Any HTTP header crosses NATS and back unchanged (name canonicalised), and
// what goes on the wire is never a name NATS or the reserved fields use.
func FuzzHeaderRoundTrip(f *testing.F) {
	for _, k := range []string{"Content-Type", "x-amz-date", "Status", "description", "nats-trace-dest",
		"Sluice-Fwd-Method", "sluice-fwd-hdr-", "Sluice-Fwd-Hdr", "Sluice-Fwd-Hdr-Sluice-Fwd-Hdr-X", "bad name", "a:b", ""} {
		f.Add(k, "v")
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		h := http.Header{name: {value, "second"}, "X-Other": {"o"}}
		wire := nats.Header{}
		err := putHeaders(wire, h, nil)
		if !validName(name) {
			if err == nil {
				t.Fatalf("invalid name %q accepted", name)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for k := range wire {
			if reserved(k) && !strings.HasPrefix(k, escapePrefix) || k != http.CanonicalHeaderKey(k) {
				t.Fatalf("%q sent as %q", name, k)
			}
		}
		want := http.Header{}
		for k, vs := range h {
			if k := http.CanonicalHeaderKey(k); !hopByHop[k] {
				want[k] = append(want[k], vs...)
			}
		}
		if got := getHeaders(wire); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v, want %v", name, got, want)
		}
	})
}

// Decoding a request never panics, and what it accepts it carries exactly.
func FuzzRequestDecode(f *testing.F) {
	f.Add("POST", "/123456789012/q?Action=SendMessage", "sqs.local:9324", "20500", []byte("body"))
	f.Add("GET", "*", "", "", []byte(nil))
	f.Add("", "http://h/p", "h", "-1", []byte("x"))
	f.Add("GET", "/%zz", "h", "99999999999999999999", []byte("x"))
	f.Fuzz(func(t *testing.T, method, uri, host, timeout string, body []byte) {
		m := &nats.Msg{Reply: "_INBOX.x", Data: body, Header: nats.Header{
			hdrMethod: {method}, hdrURI: {uri}, hdrHost: {host}, hdrTimeout: {timeout},
		}}
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		s := &Server{ctx: ctx}
		r, cancel, err := s.request(m)
		if err != nil {
			return
		}
		defer cancel()
		got, _ := io.ReadAll(r.Body)
		if r.Method != method || r.RequestURI != uri || r.Host != host || string(got) != string(body) || r.ContentLength != int64(len(body)) || !Forwarded(r) {
			t.Fatalf("decoded %q %q %q %q as %q %q %q %q", method, uri, host, body, r.Method, r.RequestURI, r.Host, got)
		}
	})
}
