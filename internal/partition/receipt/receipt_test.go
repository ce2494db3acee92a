package receipt

import (
	"encoding/base64"
	"errors"
	"testing"

	"go.uber.org/goleak"

	st "github.com/sluicemq/sluice/sluicetype"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRoundTrip(t *testing.T) {
	for _, h := range []Handle{{}, {Partition: 7, Seq: 1 << 40, Fence: 3}, {Partition: ^uint64(0), Seq: ^uint64(0), Fence: ^uint32(0)}} {
		a, b := h.Encode([6]byte{1, 2, 3, 4, 5, 6}), h.Encode([6]byte{6, 5, 4, 3, 2, 1})
		if a == b {
			t.Fatalf("%+v: two nonces, one handle %q", h, a)
		}
		for _, s := range []string{a, b} {
			if got, ok := Parse(s); !ok || got != h {
				t.Fatalf("Parse(%q) = %+v %v, want %+v", s, got, ok, h)
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, s := range []string{"", "!!!", enc([]byte("1:2:3")), enc([]byte("1:2:3:4:5")), enc([]byte("x:2:3:00")),
		enc([]byte("1:-2:3:00")), enc([]byte("1:2:4294967296:00")), enc([]byte("1:2:3:00")) + "="} {
		if h, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = %+v, want refused", s, h)
		}
	}
	var se *st.Error
	if err := Invalid("x"); !errors.As(err, &se) || se.Code != st.CodeReceiptHandleIsInvalid {
		t.Fatalf("Invalid: %v", err)
	}
}
