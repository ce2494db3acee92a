package filterpolicy

import (
	"net/netip"
	"strconv"
	"strings"
)

// IP addresses follow the rules of AWS's event-ruler (whose CIDR messages
// SNS returns word for word): a string is an IP address only if it looks
// like one (four dot-separated digit runs, or hex digits and colons with at
// least one colon; no zones, no embedded IPv4 in IPv6) and parses as one.
// An IPv4-mapped IPv6 address counts as the IPv4 address, as Java's
// InetAddress makes it.

// looksLikeIP reports whether s has the shape of an IPv4 or IPv6 literal.
func looksLikeIP(s string) bool {
	return looksLikeIPv4(s) || looksLikeIPv6(s)
}

func looksLikeIPv4(s string) bool {
	runs := 0
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i {
			return false
		}
		runs++
		if j == len(s) {
			break
		}
		if s[j] != '.' {
			return false
		}
		i = j + 1
		if i == len(s) {
			return false
		}
	}
	return runs == 4
}

func looksLikeIPv6(s string) bool {
	colon := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			colon = true
		case isDigit(c), 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return colon
}

// parseIP parses an IP literal under the rules above.
func parseIP(s string) (netip.Addr, bool) {
	if !looksLikeIP(s) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// parseCIDR validates a cidr pattern with event-ruler's checks and
// messages, in its order.
func parseCIDR(s string) (netip.Prefix, *Error) {
	parts := strings.Split(s, "/")
	// Java's String.split drops trailing empty strings.
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) != 2 {
		return netip.Prefix{}, policyError("Malformed CIDR, one '/' required")
	}
	bits, err := strconv.ParseInt(parts[1], 10, 32) // Java's Integer.parseInt: sign allowed, 32 bits
	if err != nil {
		return netip.Prefix{}, policyError("Malformed CIDR, mask bits must be an integer")
	}
	if bits < 0 {
		return netip.Prefix{}, policyError("Malformed CIDR, mask bits must not be negative")
	}
	if !looksLikeIP(parts[0]) {
		return netip.Prefix{}, policyError("Nonstandard IP address: " + parts[0])
	}
	addr, ok := parseIP(parts[0])
	if !ok {
		return netip.Prefix{}, policyError("Invalid IP address: " + parts[0])
	}
	if addr.Is4() && bits > 31 {
		return netip.Prefix{}, policyError("IPv4 mask bits must be < 32")
	}
	if addr.Is6() && bits > 127 {
		return netip.Prefix{}, policyError("IPv6 mask bits must be < 128")
	}
	return netip.PrefixFrom(addr, int(bits)).Masked(), nil
}
