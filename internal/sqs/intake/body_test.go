package intake

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sluicemq/sluice/internal/sqs/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

// TestReadBody: the body comes back whole whatever the declared length
// (exact, absent, larger than sent, beyond the pre-sized limit), replacing
// what the buffer held.
func TestReadBody(t *testing.T) {
	const pooled = 256 << 10 // the largest buffer the server recycles
	for _, n := range []int{0, 1, 4095, 4096, pooled - 1, pooled + 1, 3 * pooled} {
		body := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		for _, declared := range []int64{int64(n), -1, int64(n) + 100, 1 << 30} {
			got, err := readBody(bytes.NewReader(body), declared, []byte("old"), nil)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("n=%d declared=%d: %d bytes, %v", n, declared, len(got), err)
			}
		}
	}
}

// TestReadBodyRefusals: a body declared or found larger than
// MaxRequestBytes is RequestEntityTooLarge (declared: before it is
// admitted), a body that cannot be read is MalformedInput, and every
// grant made is given back by Done.
func TestReadBodyRefusals(t *testing.T) {
	b := NewBudget(DefaultMaxInflightBytes)
	for _, c := range []struct {
		name     string
		declared int64
		body     io.Reader
		code     st.Code
		granted  bool
	}{
		{"declared too large", MaxRequestBytes + 1, strings.NewReader(""), wire.CodeRequestTooLarge, false},
		{"found too large", -1, strings.NewReader(strings.Repeat("x", MaxRequestBytes+1)), wire.CodeRequestTooLarge, true},
		{"unreadable", -1, iotest.ErrReader(errors.New("reset")), wire.CodeMalformedInput, true},
		{"read", 3, strings.NewReader("abc"), "", true},
	} {
		r := httptest.NewRequest("POST", "/", c.body)
		r.ContentLength = c.declared
		buf := []byte("old")
		g, err := b.ReadBody(httptest.NewRecorder(), r, &buf)
		var e *st.Error
		switch {
		case c.code == "" && (err != nil || string(buf) != "abc"):
			t.Errorf("%s: %q, %v", c.name, buf, err)
		case c.code != "" && (!errors.As(err, &e) || e.Code != c.code):
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		case (g != nil) != c.granted:
			t.Errorf("%s: grant %v, want one: %v", c.name, g, c.granted)
		}
		g.Done()
	}
	if !b.sem.TryAcquire(DefaultMaxInflightBytes) {
		t.Fatal("room not given back")
	}
}
