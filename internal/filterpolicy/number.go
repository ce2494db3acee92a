package filterpolicy

// Numbers are compared the way AWS documents them for filter policies:
// values from -10^9 to 10^9 with five digits of accuracy after the decimal
// point. A number is held as floor(value × 10^5), computed exactly from
// its decimal text (never through a float64), so 3.015e2 and 301.5 are the
// same number, comparisons are plain integer comparisons, and digits past
// the fifth decimal place do not count (the way event-ruler's
// ComparableNumber truncated, one decimal place coarser).

const (
	// numberScale is 10^5: five decimal places.
	numberScale = 100000
	// numberDecimals is the exponent of numberScale.
	numberDecimals = 5
	// maxScaled is 10^9 × numberScale, the largest magnitude allowed.
	maxScaled = 1_000_000_000 * numberScale
	// maxScaledDigits is the number of digits of maxScaled.
	maxScaledDigits = 15
)

// numberRangeReason is the reason given for a policy number outside
// ±10^9. AWS's wording is not recorded; this is event-ruler's message with
// SNS's bound, formatted as Java prints the double.
const numberRangeReason = "Value must be between -1.0E9 and 1.0E9, inclusive"

// scaleNumber reads a decimal number: an optional sign ('+' too, as a
// Number message attribute may carry), digits with at most one '.', and an
// optional exponent. It returns floor(value × 10^5), whether the text is a
// number at all (valid) and whether |value| ≤ 10^9 (inRange; scaled is
// meaningful only then).
func scaleNumber(s string) (scaled int64, valid, inRange bool) {
	i, n := 0, len(s)
	neg := false
	if i < n && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	intStart := i
	for i < n && isDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	fracPart := ""
	if i < n && s[i] == '.' {
		i++
		fracStart := i
		for i < n && isDigit(s[i]) {
			i++
		}
		fracPart = s[fracStart:i]
	}
	if len(intPart)+len(fracPart) == 0 {
		return 0, false, false
	}
	exp := 0
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < n && (s[i] == '-' || s[i] == '+') {
			expNeg = s[i] == '-'
			i++
		}
		if i == n {
			return 0, false, false
		}
		for i < n && isDigit(s[i]) {
			if exp < 1_000_000 { // saturate: any larger exponent means the same here
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != n {
		return 0, false, false
	}

	// The significant digits D are intPart+fracPart without leading and
	// trailing zeros; the value is D × 10^e.
	digits := digitString{intPart, fracPart}
	first, last := -1, -1
	for j := 0; j < digits.len(); j++ {
		if digits.at(j) != '0' {
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	if first < 0 {
		return 0, true, true // zero
	}
	count := last - first + 1
	e := exp - len(fracPart) + (digits.len() - 1 - last)
	// floor(D × 10^(e+5)) has intDigits digits before the truncation.
	shift := e + numberDecimals
	intDigits := count + shift
	if intDigits > maxScaledDigits {
		return 0, true, false
	}
	var t int64
	for j := 0; j < intDigits; j++ {
		d := int64(0)
		if j < count {
			d = int64(digits.at(first+j) - '0')
		}
		t = t*10 + d
	}
	remainder := shift < 0 // D has no trailing zeros, so dropping a digit drops a non-zero one
	if t > maxScaled || (t == maxScaled && remainder) {
		return 0, true, false
	}
	if neg {
		t = -t
		if remainder {
			t-- // floor, not truncation
		}
	}
	return t, true, true
}

// digitString is the digits of an integer part and a fraction part read as
// one run, without concatenating them.
type digitString struct{ a, b string }

func (d digitString) len() int { return len(d.a) + len(d.b) }

func (d digitString) at(i int) byte {
	if i < len(d.a) {
		return d.a[i]
	}
	return d.b[i-len(d.a)]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
