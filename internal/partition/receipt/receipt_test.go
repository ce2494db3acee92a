package receipt

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
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

// parseSplit is Parse as first written (a decoded copy, strings.Split):
// the reference FuzzParse holds Parse to.
func parseSplit(s string) (Handle, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Handle{}, false
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 4 {
		return Handle{}, false
	}
	p, e1 := strconv.ParseUint(parts[0], 10, 64)
	seq, e2 := strconv.ParseUint(parts[1], 10, 64)
	f, e3 := strconv.ParseUint(parts[2], 10, 32)
	if e1 != nil || e2 != nil || e3 != nil {
		return Handle{}, false
	}
	return Handle{Partition: p, Seq: seq, Fence: uint32(f)}, true
}

// FuzzParse checks Parse against parseSplit, on raw strings and on
// encoded ones (which get past the base64 decoding).
func FuzzParse(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, s := range []string{"", "1:2:3:00", "1:2:3", "1:2:3:4:5", "::::", ":::", "18446744073709551615:18446744073709551615:4294967295:00",
		"18446744073709551616:1:1:00", "1:2:4294967296:00", "+1:2:3:00", "1_0:2:3:00", "01:2:3:" + strings.Repeat("x", 200)} {
		f.Add(s)
		f.Add(enc([]byte(s)))
	}
	f.Add(Handle{Partition: 3, Seq: 99, Fence: 2}.Encode([6]byte{1, 2, 3, 4, 5, 6}))
	f.Fuzz(func(t *testing.T, s string) {
		for _, in := range []string{s, enc([]byte(s))} {
			got, gotOK := Parse(in)
			want, wantOK := parseSplit(in)
			if got != want || gotOK != wantOK {
				t.Fatalf("Parse(%q) = %+v %v, want %+v %v", in, got, gotOK, want, wantOK)
			}
		}
	})
}
