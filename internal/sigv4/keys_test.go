package sigv4

import (
	"fmt"
	"testing"
)

// TestSigningKeysKept: a scope's key is derived once and then kept (the
// same bytes come back), for the latest keysKept scopes; an older one is
// derived again, to the same value; a scope too long is never kept.
func TestSigningKeysKept(t *testing.T) {
	var k signingKeys
	scope := func(day int) string { return fmt.Sprintf("202612%02d/us-east-1/sqs/aws4_request", day) }
	first := k.key("secret", scope(1))
	if again := k.key("secret", scope(1)); &again[0] != &first[0] {
		t.Fatal("a scope's key was derived again, not kept")
	}
	for day := 2; day <= keysKept; day++ {
		k.key("secret", scope(day))
	}
	if again := k.key("secret", scope(1)); &again[0] != &first[0] {
		t.Fatalf("the key of one of the latest %d scopes was not kept", keysKept)
	}
	k.key("secret", scope(keysKept+1))
	k.key("secret", scope(keysKept+2))
	k.key("secret", scope(keysKept+3))
	k.key("secret", scope(keysKept+4))
	again := k.key("secret", scope(1))
	if &again[0] == &first[0] {
		t.Fatalf("more than %d scopes are kept", keysKept)
	}
	if string(again) != string(first) {
		t.Fatal("a key derived again differs")
	}
	if n := len(*k.list.Load()); n != keysKept {
		t.Fatalf("%d scopes kept, want %d", n, keysKept)
	}
	long := "20261205/" + string(make([]byte, maxKeptScope)) + "/sqs/aws4_request"
	if a, b := k.key("secret", long), k.key("secret", long); &a[0] == &b[0] {
		t.Fatal("a scope longer than maxKeptScope was kept")
	}
}
