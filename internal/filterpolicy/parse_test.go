package filterpolicy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// policyJSON builds {"key": ["v0", ..., "vN-1"]}-style value lists.
func valueList(prefix string, n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("%q", fmt.Sprintf("%s%d", prefix, i))
	}
	return "[" + strings.Join(vals, ",") + "]"
}

func numberList(n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprint(i + 1)
	}
	return "[" + strings.Join(vals, ",") + "]"
}

// TestParseRefusals checks every reason AWS gives (the AWS-recorded ones
// byte for byte, the first line of AWS's message) and the ones taken from
// event-ruler.
func TestParseRefusals(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		scope  Scope
		reason string
	}{
		// AWS-recorded (LocalStack AWS-validated snapshots).
		{"nested array value", `{"key":[["value"]]}`, MessageAttributes, "Match value must be String, number, true, false, or null"},
		{"unknown operator", `{"key":[{"wrong-operator":true}]}`, MessageAttributes, "Unrecognized match type wrong-operator"},
		{"two operators", `{"key":[{"suffix":"value","prefix":"value2"}]}`, MessageAttributes, "Only one key allowed in match expression"},
		{"empty value list", `{"key":[]}`, MessageAttributes, "Empty arrays are not allowed"},
		{"suffix number", `{"key":[{"suffix":100}]}`, MessageAttributes, "suffix match pattern must be a string"},
		{"suffix null", `{"key":[{"suffix":null}]}`, MessageAttributes, "suffix match pattern must be a string"},
		{"suffix empty list", `{"key":[{"suffix":[]}]}`, MessageAttributes, "suffix match pattern must be a string"},
		{"suffix list", `{"key":[{"suffix":["test","test2"]}]}`, MessageAttributes, "suffix match pattern must be a string"},
		{"operator not in a list", `{"key":{"suffix":"value"}}`, MessageAttributes, `"suffix" must be an object or an array`},
		{"operators not in a list", `{"key":{"suffix":"value","prefix":"value"}}`, MessageAttributes, `"suffix" must be an object or an array`},
		{"key not in a list", `{"key":{"not-an-operator":"value"}}`, MessageAttributes, `"not-an-operator" must be an object or an array`},
		{"scalar value", `{"key_a":"value_one"}`, MessageBody, `"key_a" must be an object or an array`},
		{"cidr list", `{"key":[{"cidr":["bad-filter"]}]}`, MessageAttributes, "prefix match pattern must be a string"},
		{"cidr no slash", `{"key":[{"cidr":"bad-filter"}]}`, MessageAttributes, "Malformed CIDR, one '/' required"},
		{"cidr bad address", `{"key":[{"cidr":"bad-filter/64"}]}`, MessageAttributes, "Nonstandard IP address: bad-filter"},
		{"cidr bad mask", `{"key":[{"cidr":"bad-/64filter"}]}`, MessageAttributes, "Malformed CIDR, mask bits must be an integer"},
		{"cidr bad v4", `{"key":[{"cidr":"xx.11.xx/8"}]}`, MessageAttributes, "Nonstandard IP address: xx.11.xx"},
		{"cidr bad v6", `{"key":[{"cidr":"xxxx:db8:1234:1a00::/64"}]}`, MessageAttributes, "Nonstandard IP address: xxxx:db8:1234:1a00::"},
		{"numeric empty", `{"key":[{"numeric":[]}]}`, MessageAttributes, "Invalid member in numeric match: ]"},
		{"numeric unknown operator", `{"key":[{"numeric":["operator"]}]}`, MessageAttributes, "Unrecognized numeric range operator: operator"},
		{"numeric value first", `{"key":[{"numeric":[1,"<="]}]}`, MessageAttributes, "Invalid member in numeric match: 1"},
		{"numeric equals string", `{"key":[{"numeric":["=","000"]}]}`, MessageAttributes, "Value of equals must be numeric"},
		{"numeric missing value", `{"key":[{"numeric":[">="]}]}`, MessageAttributes, "Value of >= must be numeric"},
		{"numeric range reversed", `{"key":[{"numeric":["<",100,">",10]}]}`, MessageAttributes, "Too many elements in numeric expression"},
		{"numeric two lower bounds", `{"key":[{"numeric":[">=",1,">",2]}]}`, MessageAttributes, "Bad numeric range operator: >"},
		{"numeric bottom above top", `{"key":[{"numeric":[">",3,"<",1]}]}`, MessageAttributes, "Bottom must be less than top"},
		{"numeric missing top", `{"key":[{"numeric":[">",20,"<="]}]}`, MessageAttributes, "Value of <= must be numeric"},
		{"numeric missing second operator", `{"key":[{"numeric":[">",20,30]}]}`, MessageAttributes, "Bad value in numeric range: 30"},
		{"numeric bad second operator", `{"key":[{"numeric":[">",20,"test"]}]}`, MessageAttributes, "Bad numeric range operator: test"},
		{"numeric string bottom", `{"key":[{"numeric":[">","20","<","30"]}]}`, MessageAttributes, "Value of > must be numeric"},
		{"numeric string top", `{"key":[{"numeric":[">",20,"<","30"]}]}`, MessageAttributes, "Value of < must be numeric"},
		{"numeric too many terms", `{"key":[{"numeric":[">",20,"<",30,"<",50]}]}`, MessageAttributes, "Too many terms in numeric range expression"},
		{"exists null", `{"key":[{"exists":null}]}`, MessageAttributes, "exists match pattern must be either true or false."},
		{"exists string", `{"key":[{"exists":"no"}]}`, MessageAttributes, "exists match pattern must be either true or false."},
		{"anything-but unknown", `{"key":[{"anything-but":{"wrong-operator":null}}]}`, MessageAttributes, "Unsupported anything-but pattern: wrong-operator"},
		{"anything-but suffix", `{"key":[{"anything-but":{"suffix":"test"}}]}`, MessageAttributes, "Unsupported anything-but pattern: suffix"},
		{"anything-but exists", `{"key":[{"anything-but":{"exists":false}}]}`, MessageAttributes, "Unsupported anything-but pattern: exists"},
		{"anything-but prefix bool", `{"key":[{"anything-but":{"prefix":false}}]}`, MessageAttributes, "prefix match pattern must be a string"},
		{"too many keys", `{"key1":["value1"],"key2":["value2"],"key3":["value3"],"key4":["value4"],"key5":["value5"],"key6":["value6"]}`, MessageAttributes, "Filter policy can not have more than 5 keys"},
		{"too many keys in body scope", `{"key_a":["value_one"],"key_b":["value_two"],"key_c":["value_three"],"key_d":["value_four"],"key_e":["value_five"],"key_f":["value_six"]}`, MessageBody, "Filter policy can not have more than 5 keys"},
		{"151 values", `{"key":` + valueList("value", 151) + `}`, MessageAttributes, "Filter policy is too complex"},
		{"100 x 51 values", `{"key1":` + valueList("value", 100) + `,"key2":` + valueList("value", 51) + `}`, MessageAttributes, "Filter policy is too complex"},
		{"nested 216", `{"key_a":{"key_b":{"key_c":["value_one","value_two","value_three","value_four"]}},"key_d":{"key_e":["value_one","value_two","value_three"]},"key_f":["value_one","value_two","value_three"]}`, MessageBody, "Filter policy is too complex"},
		{"$or 152", orPolicy152, MessageAttributes, "Filter policy is too complex"},
		{"nested $or 160", orPolicy160, MessageBody, "Filter policy is too complex"},
		{"nested under MessageAttributes", `{"object":{"key":[{"prefix":"auto-"}]}}`, MessageAttributes, "Filter policy scope MessageAttributes does not support nested filter policy"},
		{"nested in $or under MessageAttributes", `{"$or":[{"a":["x"]},{"b":{"c":["y"]}}]}`, MessageAttributes, "Filter policy scope MessageAttributes does not support nested filter policy"},
		{"ordinary $or object under MessageAttributes", `{"$or":{"a":["x"]}}`, MessageAttributes, "Filter policy scope MessageAttributes does not support nested filter policy"},

		// event-ruler's reasons, where AWS's are not recorded.
		{"not an object", `["a"]`, MessageAttributes, "Filter is not an object"},
		{"null policy", `null`, MessageAttributes, "Filter is not an object"},
		{"empty nested object", `{"a":{}}`, MessageBody, "Empty objects are not allowed"},
		{"empty $or alternative", `{"$or":[{"a":["x"]},{}]}`, MessageBody, "Empty objects are not allowed"},
		{"empty match expression", `{"a":[{}]}`, MessageAttributes, "Match expression name not found"},
		{"prefix number", `{"a":[{"prefix":1}]}`, MessageAttributes, "prefix match pattern must be a string"},
		{"prefix object", `{"a":[{"prefix":{"equals-ignore-case":"x"}}]}`, MessageAttributes, "prefix match pattern must be a string"},
		{"equals-ignore-case number", `{"a":[{"equals-ignore-case":1}]}`, MessageAttributes, "equals-ignore-case match pattern must be a string"},
		{"prefix and more", `{"a":[{"prefix":"x","suffix":"y"}]}`, MessageAttributes, "Only one key allowed in match expression"},
		{"exists and more", `{"a":[{"exists":true,"prefix":"y"}]}`, MessageAttributes, "Only one key allowed in match expression"},
		{"cidr and more", `{"a":[{"cidr":"10.0.0.0/8","prefix":"y"}]}`, MessageAttributes, "Only one key allowed in match expression"},
		{"numeric and more", `{"a":[{"numeric":[">",1],"prefix":"y"}]}`, MessageAttributes, "Too many elements in numeric expression"},
		{"anything-but and more", `{"a":[{"anything-but":"x","prefix":"y"}]}`, MessageAttributes, "Too many elements in numeric expression"},
		{"first key decides", `{"a":[{"bogus":1,"prefix":"y"}]}`, MessageAttributes, "Unrecognized match type bogus"},
		{"wildcard is not an operator", `{"a":[{"wildcard":"x*"}]}`, MessageAttributes, "Unrecognized match type wildcard"},
		{"numeric not a list", `{"a":[{"numeric":5}]}`, MessageAttributes, "Value of numeric must be an array."},
		{"numeric bool operator", `{"a":[{"numeric":[true]}]}`, MessageAttributes, "Invalid member in numeric match: true"},
		{"numeric object operator", `{"a":[{"numeric":[{}]}]}`, MessageAttributes, "Invalid member in numeric match: {"},
		{"numeric = extra", `{"a":[{"numeric":["=",1,2]}]}`, MessageAttributes, "Too many elements in numeric expression"},
		{"numeric < extra", `{"a":[{"numeric":["<",1,"<",2]}]}`, MessageAttributes, "Too many elements in numeric expression"},
		{"numeric equal bounds", `{"a":[{"numeric":[">=",1,"<=",1]}]}`, MessageAttributes, "Bottom must be less than top"},
		{"numeric above 1e9", `{"a":[{"numeric":[">",1000000000.00001]}]}`, MessageAttributes, numberRangeReason},
		{"numeric below -1e9", `{"a":[{"numeric":["<",-1e10]}]}`, MessageAttributes, numberRangeReason},
		{"numeric range top above 1e9", `{"a":[{"numeric":[">",0,"<",2e9]}]}`, MessageAttributes, numberRangeReason},
		{"anything-but bool", `{"a":[{"anything-but":true}]}`, MessageAttributes, "Value of anything-but must be an array or single string/number value."},
		{"anything-but null in list", `{"a":[{"anything-but":["x",null]}]}`, MessageAttributes, "Inside anything but list, start|null|boolean is not supported."},
		{"anything-but mixed list", `{"a":[{"anything-but":["x",1]}]}`, MessageAttributes, "Inside anything but list, either all values are number or string, mixed type is not supported"},
		{"anything-but empty list", `{"a":[{"anything-but":[]}]}`, MessageAttributes, "Inside anything but list, either all values are number or string, mixed type is not supported"},
		{"anything-but number out of range", `{"a":[{"anything-but":[1e12]}]}`, MessageAttributes, numberRangeReason},
		{"anything-but empty prefix", `{"a":[{"anything-but":{"prefix":""}}]}`, MessageAttributes, "Null prefix/suffix not allowed"},
		{"anything-but empty object", `{"a":[{"anything-but":{}}]}`, MessageAttributes, "Anything-But expression name not found"},
		{"anything-but equals-ignore-case", `{"a":[{"anything-but":{"equals-ignore-case":"x"}}]}`, MessageAttributes, "Unsupported anything-but pattern: equals-ignore-case"},
		{"anything-but prefix and more", `{"a":[{"anything-but":{"prefix":"x","suffix":"y"}}]}`, MessageAttributes, "Only one key allowed in match expression"},
		{"cidr negative mask", `{"a":[{"cidr":"10.0.0.0/-1"}]}`, MessageAttributes, "Malformed CIDR, mask bits must not be negative"},
		{"cidr v4 /32", `{"a":[{"cidr":"10.0.0.1/32"}]}`, MessageAttributes, "IPv4 mask bits must be < 32"},
		{"cidr v6 /128", `{"a":[{"cidr":"::1/128"}]}`, MessageAttributes, "IPv6 mask bits must be < 128"},
		{"cidr octet over 255", `{"a":[{"cidr":"10.0.0.256/24"}]}`, MessageAttributes, "Invalid IP address: 10.0.0.256"},
		{"cidr two slashes", `{"a":[{"cidr":"10.0.0.0/8/8"}]}`, MessageAttributes, "Malformed CIDR, one '/' required"},
		{"cidr empty address", `{"a":[{"cidr":"/8"}]}`, MessageAttributes, "Nonstandard IP address: "},
		{"$or with one object is an ordinary key", `{"$or":[{"a":["x"]}]}`, MessageAttributes, "Unrecognized match type a"},
		{"$or with reserved keys is an ordinary key", `{"$or":[{"numeric":123},{"prefix":"abc"}]}`, MessageAttributes, "Value of numeric must be an array."},
		{"$or scalar", `{"$or":"x"}`, MessageAttributes, `"$or" must be an object or an array`},
		{"$or empty", `{"$or":[]}`, MessageAttributes, "Empty arrays are not allowed"},
		{"bad value in an $or alternative", `{"$or":[{"a":["x"]},{"b":[{"bogus":1}]}]}`, MessageAttributes, "Unrecognized match type bogus"},

		// Size and syntax.
		{"too large", `{"a":["` + strings.Repeat("x", MaxPolicySize) + `"]}`, MessageAttributes, "Filter policy is too large"},
		{"truncated", `{"a":["x"]`, MessageAttributes, "failed to parse JSON. Unexpected end-of-input: expected close marker for Object"},
		{"trailing comma", `{"a":["x"],}`, MessageAttributes, "failed to parse JSON. Unexpected character ('}' (code 125)): was expecting double-quote to start field name"},
		{"single quotes", `{'a':['x']}`, MessageAttributes, "failed to parse JSON. Unexpected character (''' (code 39)): was expecting double-quote to start field name"},
		{"bare word", `{"a":[yes]}`, MessageAttributes, "failed to parse JSON. Unrecognized token 'yes': was expecting (JSON String, Number, Array, Object or token 'null', 'true' or 'false')"},
		{"leading zero", `{"a":[01]}`, MessageAttributes, "failed to parse JSON. Invalid numeric value: Leading zeroes not allowed"},
		{"whitespace only", "  ", MessageAttributes, "failed to parse JSON. No content to map due to end-of-input"},
		{"trailing text", `{"a":["x"]} x`, MessageAttributes, "failed to parse JSON. Unexpected character ('x' (code 120)): expected end-of-input after the root value"},
		{"raw newline in a string", "{\"a\":[\"x\ny\"]}", MessageAttributes, "failed to parse JSON. Illegal unquoted character ((CTRL-CHAR, code 10)): has to be escaped using backslash to be included in string value"},
		{"too deep", strings.Repeat(`{"a":`, 1001) + `["x"]` + strings.Repeat("}", 1001), MessageBody, "failed to parse JSON. Document nesting depth (1001) exceeds the maximum allowed (1000, from `StreamReadConstraints.getMaxNestingDepth()`)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.policy, tt.scope)
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Parse = %v, %v; want *Error %q", p, err, tt.reason)
			}
			if perr.Reason != tt.reason || err.Error() != tt.reason {
				t.Fatalf("reason = %q\nwant     %q", perr.Reason, tt.reason)
			}
		})
	}
}

// The AWS-recorded $or complexity cases (test_policy_complexity_with_or).
const (
	// (source × metricName) + (source × metricType × metricId) + (source ×
	// metricType × spaceId) = 4×6 + 4×4×4 + 4×4×4 = 152.
	orPolicy152 = `{"source":["aws.cloudwatch","aws.events","aws.test","aws.test2"],
		"$or":[{"metricName":["CPUUtilization","ReadLatency","t1","t2","t3","t4"]},
		       {"metricType":["MetricType","TestType","TestType2","TestType3"],
		        "$or":[{"metricId":[1234,4321,5678,9012]},{"spaceId":[1,2,3,4]}]}]}`
	// 3×6 + 3×4×4 + 3×4×7 = 150.
	orPolicy150 = `{"source":["aws.cloudwatch","aws.events","aws.test"],
		"$or":[{"metricName":["CPUUtilization","ReadLatency","TestVal","TestVal2","TestVal3","TestVal4"]},
		       {"metricType":["MetricType","TestType","TestType2","TestType3"],
		        "$or":[{"metricId":[1234,4321,5678,9012]},{"spaceId":[1,2,3,4,5,6,7]}]}]}`
	// Nested: (3×4×2) + (3×4×6) + (2×4×2) + (2×4×6) = 160, each value
	// count times the depth of its key.
	orPolicy160 = `{"$or":[{"metricName":["CPUUtilization","ReadLatency","TestValue"]},{"namespace":["AWS/EC2","AWS/ES"]}],
		"detail":{"scope":["Service","Test"],
		          "$or":[{"source":["aws.cloudwatch"]},{"type":["CloudWatch Alarm State Change","TestValue","TestValue2"]}]}}`
)

// complexity is the combination count Parse computes for a policy.
func complexity(t *testing.T, policy string) int {
	t.Helper()
	nodes, err := parseJSON(policy)
	if err != nil {
		t.Fatal(err)
	}
	o, perr := newCompiler(nodes).object(0)
	if perr != nil {
		t.Fatal(perr)
	}
	return o.combinations(1)
}

func TestCombinations(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		scope  Scope
		want   int // as computed; 151 means "over the limit"
		ok     bool
	}{
		{"documented flat 3x1x2", `{"key_a":["value_one","value_two","value_three"],"key_b":["value_one"],"key_c":["value_one","value_two"]}`, MessageAttributes, 6, true},
		{"documented nested 3x4x2x3", `{"key_a":{"key_b":{"key_c":["value_one","value_two","value_three","value_four"]}},"key_d":{"key_e":["value_one","value_two","value_three"]}}`, MessageBody, 72, true},
		{"150 values", `{"key":` + valueList("v", 150) + `}`, MessageAttributes, 150, true},
		{"151 values", `{"key":` + valueList("v", 151) + `}`, MessageAttributes, 151, false},
		{"$or 150", orPolicy150, MessageAttributes, 150, true},
		{"$or 152", orPolicy152, MessageAttributes, 151, false},
		{"nested $or 160", orPolicy160, MessageBody, 151, false},
		{"nested $or 160 less one value", strings.Replace(orPolicy160, `,"TestValue2"`, "", 1), MessageBody, 5 * 4 * (2 + 4), true}, // 120
		{"75 values at depth 2", `{"a":{"b":` + numberList(75) + `}}`, MessageBody, 150, true},
		{"76 values at depth 2", `{"a":{"b":` + numberList(76) + `}}`, MessageBody, 151, false},
		{"$or alternatives add", `{"$or":[{"a":` + numberList(75) + `},{"b":` + numberList(75) + `}]}`, MessageAttributes, 150, true},
		{"$or alternatives add over", `{"$or":[{"a":` + numberList(75) + `},{"b":` + numberList(76) + `}]}`, MessageAttributes, 151, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := complexity(t, tt.policy); got != tt.want {
				t.Errorf("combinations = %d, want %d", got, tt.want)
			}
			p, err := Parse(tt.policy, tt.scope)
			if tt.ok && (err != nil || p == nil) {
				t.Fatalf("Parse = %v, %v; want a policy", p, err)
			}
			if !tt.ok && (err == nil || err.Error() != "Filter policy is too complex") {
				t.Fatalf("Parse error = %v; want too complex", err)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		scope  Scope
	}{
		{"exact values", `{"a":["x",1,3.015e2,true,false,null]}`, MessageAttributes},
		{"all operators", `{"a":[{"prefix":"p"},{"suffix":"s"},{"equals-ignore-case":"E"},{"anything-but":"x"},{"anything-but":["x","y"]},{"anything-but":[1,2]},{"anything-but":5},{"anything-but":{"prefix":"o-"}},{"numeric":["=",1]},{"numeric":[">",0,"<=",100]},{"numeric":[">=",-1e9,"<",1e9]},{"exists":true},{"exists":false},{"cidr":"10.0.0.0/24"},{"cidr":"2001:db8::/32"}]}`, MessageAttributes},
		{"five keys", `{"a":["1"],"b":["1"],"c":["1"],"d":["1"],"e":["1"]}`, MessageAttributes},
		{"duplicate keys count once", `{"a":["1"],"b":["1"],"c":["1"],"d":["1"],"e":["1"],"a":["2"]}`, MessageAttributes},
		{"only top-level keys count", `{"a":{"b":["1"],"c":["1"],"d":["1"],"e":["1"],"f":["1"],"g":["1"]}}`, MessageBody},
		{"nested under MessageBody", `{"object":{"key":[{"prefix":"auto-"}]}}`, MessageBody},
		{"$or", `{"source":["aws.cloudwatch"],"$or":[{"metricName":["CPUUtilization"]},{"namespace":["AWS/EC2"]}]}`, MessageAttributes},
		{"$or 150", orPolicy150, MessageAttributes},
		{"$or as an ordinary nested key", `{"source":["aws.cloudwatch"],"$or":{"metricType":["MetricType"],"namespace":["AWS/EC2","AWS/ES"]}}`, MessageBody},
		{"$or of operators is an ordinary key", `{"$or":[{"prefix":"a"},{"suffix":"b"}]}`, MessageAttributes},
		{"exact number out of range", `{"account":[123456789012]}`, MessageAttributes},
		{"numeric bound exactly 1e9", `{"a":[{"numeric":["<=",1000000000]}]}`, MessageAttributes},
		{"anything-but prefix", `{"key":[{"anything-but":{"prefix":"test-"}}]}`, MessageAttributes},
		{"anything-but list", `{"key":[{"anything-but":["test","test2"]}]}`, MessageAttributes},
		{"cidr v6 /64", `{"a":[{"cidr":"2001:db8:1234:1a00::/64"}]}`, MessageAttributes},
		{"cidr /0", `{"a":[{"cidr":"0.0.0.0/0"}]}`, MessageAttributes},
		{"escaped key", `{"a\"b":["\u00e9\ud83d\ude00"]}`, MessageAttributes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.policy, tt.scope)
			if err != nil || p == nil {
				t.Fatalf("Parse = %v, %v; want a policy", p, err)
			}
			if p.Scope() != tt.scope {
				t.Errorf("Scope = %v, want %v", p.Scope(), tt.scope)
			}
		})
	}
}

// TestParseNoPolicy: "" (AWS removes the policy) and "{}" (AWS documents
// it for removing one) are no policy, and no policy admits everything.
func TestParseNoPolicy(t *testing.T) {
	for _, policy := range []string{"", "{}", " { } \n"} {
		for _, scope := range []Scope{MessageAttributes, MessageBody} {
			p, err := Parse(policy, scope)
			if p != nil || err != nil {
				t.Fatalf("Parse(%q) = %v, %v; want nil, nil", policy, p, err)
			}
			if !p.MatchAttributes(nil) || !p.MatchBody([]byte("not json")) || !p.Match(nil, "") || !p.MatchParsedBody(nil) {
				t.Fatalf("a nil policy refused a message")
			}
			if p.Scope() != MessageAttributes {
				t.Fatalf("nil policy scope = %v", p.Scope())
			}
		}
	}
}

// TestErrorMessage renders the full messages AWS returns (recorded).
func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		scope  Scope
		op     Operation
		want   string
	}{
		{"subscribe, too many keys", `{"key1":["value1"],"key2":["value2"],"key3":["value3"],"key4":["value4"],"key5":["value5"],"key6":["value6"]}`, MessageAttributes, Subscribe,
			"Invalid parameter: Attributes Reason: FilterPolicy: Filter policy can not have more than 5 keys"},
		{"subscribe, too complex", `{"key":` + valueList("value", 151) + `}`, MessageAttributes, Subscribe,
			"Invalid parameter: Attributes Reason: FilterPolicy: Filter policy is too complex"},
		{"subscribe, operator", `{"key":[{"wrong-operator":true}]}`, MessageAttributes, Subscribe,
			"Invalid parameter: Attributes Reason: FilterPolicy: Unrecognized match type wrong-operator"},
		{"set, too complex", `{"key_a":{"key_b":{"key_c":["value_one","value_two","value_three","value_four"]}},"key_d":{"key_e":["value_one","value_two","value_three"]},"key_f":["value_one","value_two","value_three"]}`, MessageBody, SetSubscriptionAttributes,
			"Invalid parameter: FilterPolicy: Filter policy is too complex"},
		{"set, too many keys", `{"key_a":["value_one"],"key_b":["value_two"],"key_c":["value_three"],"key_d":["value_four"],"key_e":["value_five"],"key_f":["value_six"]}`, MessageBody, SetSubscriptionAttributes,
			"Invalid parameter: FilterPolicy: Filter policy can not have more than 5 keys"},
		{"set, not a list", `{"key_a":"value_one"}`, MessageBody, SetSubscriptionAttributes,
			`Invalid parameter: FilterPolicy: "key_a" must be an object or an array`},
		{"set, nested", `{"object":{"key":[{"prefix":"auto-"}]}}`, MessageAttributes, SetSubscriptionAttributes,
			"Invalid parameter: Filter policy scope MessageAttributes does not support nested filter policy"},
		{"subscribe, nested", `{"object":{"key":[{"prefix":"auto-"}]}}`, MessageAttributes, Subscribe,
			"Invalid parameter: Attributes Reason: Filter policy scope MessageAttributes does not support nested filter policy"},
		{"subscribe, bad JSON", `{"a":`, MessageAttributes, Subscribe,
			"Invalid parameter: Attributes Reason: FilterPolicy: failed to parse JSON. Unexpected end-of-input: expected close marker for Object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.policy, tt.scope)
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Parse error = %v; want *Error", err)
			}
			if got := perr.Message(tt.op); got != tt.want {
				t.Fatalf("Message = %q\nwant      %q", got, tt.want)
			}
		})
	}
}

func TestParseScope(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Scope
	}{{"MessageAttributes", MessageAttributes}, {"MessageBody", MessageBody}} {
		got, err := ParseScope(tt.in)
		if err != nil || got != tt.want || got.String() != tt.in {
			t.Errorf("ParseScope(%q) = %v, %v", tt.in, got, err)
		}
	}
	for _, in := range []string{"RandomValue", "", "messagebody", "MessageBody "} {
		_, err := ParseScope(in)
		var perr *Error
		if !errors.As(err, &perr) {
			t.Fatalf("ParseScope(%q) error = %v; want *Error", in, err)
		}
		want := "Invalid value [" + in + "]. Please use either MessageBody or MessageAttributes"
		if perr.Reason != want {
			t.Errorf("reason = %q, want %q", perr.Reason, want)
		}
		if in == "RandomValue" {
			// AWS-recorded (SetSubscriptionAttributes).
			if got := perr.Message(SetSubscriptionAttributes); got != "Invalid parameter: FilterPolicyScope: Invalid value [RandomValue]. Please use either MessageBody or MessageAttributes" {
				t.Errorf("Message = %q", got)
			}
		}
	}
}
