package message

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	st "github.com/sluicemq/sluice/sluicetype"
)

// refBodyChars is the rule as the SQS documentation states it, written
// plainly: valid UTF-8 of #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
// #x10000-#x10FFFF.
func refBodyChars(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

var bodySeeds = []string{"", "plain", "tab\tcr\rlf\n", "nul\x00", "bell\x07", "del\x7f", "é✓😀", "\uFFFD", "\uFFFE",
	"\uFFFF", "\uE000", "\uD7FF", "\xed\xa0\x80" /* a surrogate */, "\xff", "ok\xc3", "\U0010FFFF", "\xf4\x90\x80\x80"}

// TestValidBodyChars: each seed alone, and inside plain text at every
// offset of the eight-byte words the check skips plain text by.
func TestValidBodyChars(t *testing.T) {
	const plain = "The quick brown fox jumps over the lazy dog"
	for _, seed := range bodySeeds {
		for at := 0; at <= 17; at++ {
			for _, s := range []string{seed, plain[:at] + seed + plain, plain[:at] + seed + plain[:at] + seed} {
				if got, want := ValidBodyChars(s), refBodyChars(s); got != want {
					t.Errorf("%q: %v, want %v", s, got, want)
				}
			}
		}
	}
}

func FuzzValidBodyChars(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidBodyChars(s), refBodyChars(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	})
}

// validName is held to the regular expressions it replaced.
func TestValidNameMatchesRegexp(t *testing.T) {
	plain := regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	dotted := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,256}$`)
	check := func(s string) {
		if got, want := ValidName(s, 80, false), plain.MatchString(s); got != want {
			t.Errorf("ValidName(%q, 80, false) = %v, want %v", s, got, want)
		}
		if got, want := ValidName(s, 256, true), dotted.MatchString(s); got != want {
			t.Errorf("ValidName(%q, 256, true) = %v, want %v", s, got, want)
		}
	}
	for _, s := range []string{"", "a", "A-z_09", "a.b", "a b", "é", "a\n", strings.Repeat("x", 80), strings.Repeat("x", 81),
		strings.Repeat("y", 256), strings.Repeat("y", 257), "-", ".", "a/b", "a:b", "\x00"} {
		check(s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		alphabet := "aZ09_-. /:é\x00\xff"
		if i%2 == 0 {
			alphabet = "aZ09_-." // mostly valid, so long names come up
		}
		b := make([]byte, rng.IntN(300))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

// TestIsNumber: SQS's Number type: up to 38 significant digits, a
// magnitude between 10^-128 and 10^126, and a well-formed exponent.
func TestIsNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-0": true, "+7": true, "1.5": true, ".5": true, "1.": true, " 42 ": true,
		"1e5": true, "2.5E-3": true, "1e126": true, "9.9e125": true, "1e-128": true, "0e999999": false, "0e9999": true,
		"00012300000": true, strings.Repeat("9", 38): true, strings.Repeat("9", 38) + "000": true,
		"0.000" + strings.Repeat("1", 38): true,
		"1e400":                           false, "1e127": false, "1e-129": false, "-1e400": false, "1e99999999999": false,
		strings.Repeat("9", 39): false, "": false, ".": false, "-": false, "1e": false,
		"1e+": false, "e5": false, "1.2.3": false, "1e5e3": false, "0x10": false, "NaN": false, "Infinity": false,
	} {
		if got := isNumber(s); got != want {
			t.Errorf("isNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

func sp(s string) *string { return &s }

func TestMD5Vectors(t *testing.T) {
	a1 := st.AttributeValue{DataType: "String", StringValue: sp("attribValue 1")}
	a2 := st.AttributeValue{DataType: "Number.float", StringValue: sp("4563442423554324324264524243.32543234")}
	a3 := st.AttributeValue{DataType: "Binary", BinaryValue: []byte("Hello binary world!")}
	general := st.AttributeValue{DataType: "String", StringValue: sp("Kenobi")}
	hello := st.AttributeValue{DataType: "String", StringValue: sp("There")}
	helpMe := st.AttributeValue{DataType: "String", StringValue: sp("Me")}
	cases := []struct {
		attrs map[string]st.AttributeValue
		want  string
	}{
		{map[string]st.AttributeValue{"attribName1": a1}, "19e27d4e946b072f3f58da80d94fd778"},
		{map[string]st.AttributeValue{"customNumberTypeAttrib": a2}, "9fe1b90bbd9965bdf77bac517c7d2495"},
		{map[string]st.AttributeValue{"binaryAttribute": a3}, "31a92b15d92f8db860eda32aceb656c3"},
		{map[string]st.AttributeValue{"attribName1": a1, "customNumberTypeAttrib": a2, "binaryAttribute": a3}, "c932db14a896c663f83c260297d594ff"},
		{map[string]st.AttributeValue{"General": general, "Hello": hello, "Help.Me": helpMe}, "4c360f3fdafd970e05fae2f149d997f5"},
		{map[string]st.AttributeValue{"General": general, "Hello": hello}, "fca026605781cb4126a1e9044df24232"},
		{map[string]st.AttributeValue{"Hello": hello}, "a311262e065454b75da111d535b8dacd"},
		{map[string]st.AttributeValue{"Hello": hello, "Help.Me": helpMe}, "83fee93c1bcd8b9a5a923ffacdc636c7"},
		{map[string]st.AttributeValue{"MyAttribute": {DataType: "String", StringValue: sp("foobar")}}, "adb59cd4678ea5a855436b949cd07ab6"},
		{map[string]st.AttributeValue{"Foo": {DataType: "String", StringValue: sp("Bar")}}, "ae7155c6026991b6d54b11589678bf9c"},
		{map[string]st.AttributeValue{"attr1": {DataType: "Binary", BinaryValue: []byte("traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01")}}, "8cbe4db156db8a94db8b801b7addb984"},
		{map[string]st.AttributeValue{"timestamp": {DataType: "Number", StringValue: sp("1493147359900")}}, "235c5c510d26fb653d073faed50ae77c"},
		{map[string]st.AttributeValue{"AWSTraceHeader": {DataType: "String", StringValue: sp("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")}}, "5ae4d5d7636402d80f4eb6d213245a88"},
	}
	for i, c := range cases {
		if got := AttributesMD5(c.attrs); got != c.want {
			t.Errorf("vector %d: got %s want %s", i, got, c.want)
		}
	}
	for body, want := range map[string]string{"test": "098f6bcd4621d373cade4e832627b4f6", "msg": "6e2baaf3b97dbeef01c0043275f9a0e7",
		"message": "78e731027d8fd50ed642340b7c9a63b3", "hello": "5d41402abc4b2a76b9719d911017c592"} {
		if got := BodyMD5(body); got != want {
			t.Errorf("body %q: %s", body, got)
		}
	}
	if AttributesMD5(nil) != "" {
		t.Error("no attributes must give no MD5")
	}
}

func FuzzMessageAttributesMD5(f *testing.F) {
	f.Add("name", "String", "value", []byte{1})
	f.Fuzz(func(t *testing.T, name, typ, val string, bin []byte) {
		a := map[string]st.AttributeValue{name: {DataType: typ, StringValue: &val}, name + "b": {DataType: typ, BinaryValue: bin}}
		if AttributesMD5(a) != AttributesMD5(a) {
			t.Fatal("md5 not deterministic")
		}
	})
}

// NewID is a version 4 UUID whatever the bytes, and one a client accepts.
func TestNewID(t *testing.T) {
	var ones [16]byte
	for i := range ones {
		ones[i] = 0xff
	}
	for _, b := range [][16]byte{{}, ones, {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}} {
		id := NewID(b)
		if len(id) != 36 || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || id[8] != '-' || id[23] != '-' || !ValidID(id) {
			t.Errorf("NewID(%x) = %s", b, id)
		}
	}
	if got := NewID([16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}); got != "12345678-9abc-4ef0-8123-456789abcdef" {
		t.Errorf("NewID = %s", got)
	}
}

// CheckReceive refuses what SQS refuses, naming the parameter, and
// defaults MaxNumberOfMessages to 1.
func TestCheckReceive(t *testing.T) {
	n := func(v int) *int { return &v }
	if max, err := CheckReceive(&st.ReceiveInput{}); err != nil || max != 1 {
		t.Fatalf("empty receive: %d %v", max, err)
	}
	if max, err := CheckReceive(&st.ReceiveInput{MaxMessages: 10, WaitTimeSeconds: n(20), VisibilityTimeout: n(43200), AttemptID: "a-1"}); err != nil || max != 10 {
		t.Fatalf("largest receive: %d %v", max, err)
	}
	for name, in := range map[string]st.ReceiveInput{
		"MaxNumberOfMessages":     {MaxMessages: 11},
		"WaitTimeSeconds":         {WaitTimeSeconds: n(21)},
		"VisibilityTimeout":       {VisibilityTimeout: n(-1)},
		"ReceiveRequestAttemptId": {AttemptID: "no spaces"},
	} {
		if _, err := CheckReceive(&in); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s out of range: %v", name, err)
		}
	}
}
