package filterpolicy

import (
	"fmt"
	"strings"
	"testing"
)

// The S3 example of AWS's payload-filtering announcement, AWS-validated by
// LocalStack (test_filter_policy_on_message_body_array_of_object_attributes).
const s3Policy = `{"Records":{"s3":{"object":{"key":[{"prefix":"auto-"}]}},"eventName":[{"prefix":"ObjectCreated:"}]}}`

func s3Event(eventName, key string) string {
	return fmt.Sprintf(`{"Records":[{"eventSource":"aws:s3","eventTime":"2022-11-21T03:41:29.743Z","eventName":%q,
		"s3":{"bucket":{"name":"insurance-bucket-demo","arn":"arn:aws:s3:::insurance-bucket-demo"},
		"object":{"key":%q,"size":17}}}]}`, eventName, key)
}

// The $or example of test_filter_policy_on_message_body_or_attribute.
const orBodyPolicy = `{"$or":[{"metricName":["CPUUtilization","ReadLatency"]},{"namespace":["AWS/EC2","AWS/ES"]}],
	"detail":{"scope":["Service"],"$or":[{"source":["aws.cloudwatch"]},{"type":["CloudWatch Alarm State Change"]}]}}`

func TestMatchBody(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		body   string
		want   bool
	}{
		// The body must be a JSON object.
		{"plain text", `{"a":["x"]}`, `Regular string message`, false},
		{"JSON string", `{"a":["x"]}`, `"Regular string message"`, false},
		{"JSON array", `{"a":["x"]}`, `[{"a":"x"}]`, false},
		{"invalid JSON", `{"a":["x"]}`, `{"a":"x"`, false},
		{"exists false still needs an object", `{"a":[{"exists":false}]}`, `not json`, false},
		{"flat", `{"a":["x"]}`, `{"a":"x"}`, true},

		// test_filter_policy_on_message_body (AWS-validated).
		{"nested prefix", `{"object":{"key":[{"prefix":"auto-"},"hardcodedvalue"],"nested_key":[{"exists":false}]},"test":[{"exists":false}]}`, `{"object":{"key":"auto-test"}}`, true},
		{"nested exact", `{"object":{"key":[{"prefix":"auto-"},"hardcodedvalue"],"nested_key":[{"exists":false}]},"test":[{"exists":false}]}`, `{"object":{"key":"hardcodedvalue"}}`, true},
		{"nested miss", `{"object":{"key":[{"prefix":"auto-"},"hardcodedvalue"],"nested_key":[{"exists":false}]},"test":[{"exists":false}]}`, `{"object":{"key":"test-auto"}}`, false},
		{"nested, test exists", `{"object":{"key":[{"prefix":"auto-"},"hardcodedvalue"],"nested_key":[{"exists":false}]},"test":[{"exists":false}]}`, `{"object":{"key":"auto-test"},"test":"just-exists"}`, false},
		{"nested, nested_key exists", `{"object":{"key":[{"prefix":"auto-"},"hardcodedvalue"],"nested_key":[{"exists":false}]},"test":[{"exists":false}]}`, `{"object":{"key":"auto-test","nested_key":"just-exists"}}`, false},
		{"nested, wrong key", `{"object":{"key":[{"prefix":"auto-"},"hardcodedvalue"],"nested_key":[{"exists":false}]},"test":[{"exists":false}]}`, `{"object":{"test":"auto-test"}}`, false},
		{"nested, top only", `{"object":{"key":[{"prefix":"auto-"},"hardcodedvalue"],"nested_key":[{"exists":false}]},"test":[{"exists":false}]}`, `{"test":"auto-test"}`, false},

		// Dotted keys (test_filter_policy_on_message_body_dot_attribute, AWS-validated).
		{"dot policy, nested body", `{"object.nested":["string.value"]}`, `{"object":{"nested":"string.value"}}`, true},
		{"dot policy, dotted body", `{"object.nested":["string.value"]}`, `{"object.nested":"string.value"}`, true},
		{"dot policy, miss", `{"object.nested":["string.value"]}`, `{"object":{"nested":"test-auto"}}`, false},
		{"deep dot, nested", `{"object.nested.test":["string.value"]}`, `{"object":{"nested":{"test":"string.value"}}}`, true},
		{"deep dot, dotted", `{"object.nested.test":["string.value"]}`, `{"object.nested.test":"string.value"}`, true},
		{"deep dot, a.b then c", `{"object.nested.test":["string.value"]}`, `{"object.nested":{"test":"string.value"}}`, true},
		{"deep dot, a then b.c", `{"object.nested.test":["string.value"]}`, `{"object":{"nested.test":"string.value"}}`, true},
		{"deep dot, miss", `{"object.nested.test":["string.value"]}`, `{"object":{"nested":{"test":"string.notvalue"}}}`, false},
		{"nested policy, dotted body", `{"a":{"b":{"c":["x"]}}}`, `{"a.b.c":"x"}`, true},
		{"mixed policy, mixed body", `{"a.b":{"c":["x"]}}`, `{"a":{"b.c":"x"}}`, true},
		{"dot is not a wildcard", `{"a.b":["x"]}`, `{"ab":"x"}`, false},
		{"key prefix is not a path", `{"a.b":["x"]}`, `{"a":{"bc":"x"}}`, false},
		{"both spellings, one matches", `{"a.b":["x"]}`, `{"a":{"b":"y"},"a.b":"x"}`, true},
		{"both spellings, other matches", `{"a.b":["x"]}`, `{"a":{"b":"x"},"a.b":"y"}`, true},
		{"duplicate body key", `{"a":["x"]}`, `{"a":"y","a":"x"}`, true},

		// Arrays (test_filter_policy_on_message_body_array_attributes, AWS-validated).
		{"route-to queue1, only queue3", `{"headers":{"route-to":["queue1"]}}`, `{"headers":{"route-to":["queue3"]}}`, false},
		{"route-to queue1", `{"headers":{"route-to":["queue1"]}}`, `{"headers":{"route-to":["queue1"]}}`, true},
		{"route-to queue1, both", `{"headers":{"route-to":["queue1"]}}`, `{"headers":{"route-to":["queue1","queue2"]}}`, true},
		{"route-to queue2, both", `{"headers":{"route-to":["queue2"]}}`, `{"headers":{"route-to":["queue1","queue2"]}}`, true},
		{"route-to queue2, only queue1", `{"headers":{"route-to":["queue2"]}}`, `{"headers":{"route-to":["queue1"]}}`, false},
		{"array of arrays", `{"a":["x"]}`, `{"a":[["y"],[["x"]]]}`, true},
		{"anything-but on an array", `{"a":[{"anything-but":["rugby","tennis"]}]}`, `{"a":["rugby","baseball"]}`, true},
		{"anything-but on an array of listed values", `{"a":[{"anything-but":["rugby","tennis"]}]}`, `{"a":["rugby"]}`, false},
		{"anything-but numbers on an array", `{"p":[{"anything-but":[100,500]}]}`, `{"p":[100,50]}`, true},

		// Objects inside arrays: the S3 example (AWS-validated).
		{"s3 created auto", s3Policy, s3Event("ObjectCreated:Put", "auto-insurance-2314.xml"), true},
		{"s3 removed auto", s3Policy, s3Event("ObjectRemoved:Delete", "auto-insurance-2314.xml"), false},
		{"s3 created home", s3Policy, s3Event("ObjectCreated:Put", "home-insurance-2314.xml"), false},
		{"s3 two records, one meets both", s3Policy, `{"Records":[
			{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"object":[[{"key":"auto-insurance-2314.xml","size":17}]]}},
			{"eventSource":"aws:s3","eventName":"ObjectRemoved:Delete","s3":{"object":{"key":"home-insurance-2314.xml","size":17}}}]}`, true},
		{"s3 two records, each meets half", s3Policy, `{"Records":[
			{"eventName":"ObjectCreated:Put","s3":{"object":{"key":"home-insurance.xml"}}},
			{"eventName":"ObjectRemoved:Delete","s3":{"object":{"key":"auto-insurance.xml"}}}]}`, false},
		{"one element, nested array inside", `{"r":{"a":["1"],"b":{"c":["2"]}}}`, `{"r":[{"a":"1","b":[{"c":"9"},{"c":"2"}]}]}`, true},
		{"two elements, nested array inside", `{"r":{"a":["1"],"b":{"c":["2"]}}}`, `{"r":[{"a":"1","b":[{"c":"9"}]},{"a":"0","b":[{"c":"2"}]}]}`, false},
		{"two arrays under one object are independent", `{"x":{"a":["1"],"b":["2"]}}`, `{"x":{"a":["0","1"],"b":["2","3"]}}`, true},
		{"same array, value and object elements", `{"a":["x"],"a.b":["y"]}`, `{"a":["x",{"b":"y"}]}`, false},
		{"same array, one element", `{"a.b":["y"],"a.c":["z"]}`, `{"a":[{"b":"y","c":"z"}]}`, true},
		{"exists false across elements", `{"r":{"a":["1"],"b":[{"exists":false}]}}`, `{"r":[{"a":"1"},{"b":"2"}]}`, false},

		// Empty arrays (test_filter_policy_empty_array_payload, AWS-validated).
		{"empty array elsewhere", `{"detail":{"eventVersion":[""]}}`, `{"version":"0","id":"3e3c153a-8339-4e30-8c35-687ebef853fe","detail-type":"EC2 Instance Launch Successful","source":"aws.autoscaling","account":"123456789012","time":"2015-11-11T21:31:47Z","region":"my-region","resources":[],"detail":{"eventVersion":"","responseElements":null}}`, true},
		{"empty array matches nothing", `{"resources":[{"anything-but":"x"}]}`, `{"resources":[]}`, false},
		{"empty array has no value", `{"resources":[{"exists":true}]}`, `{"resources":[]}`, false},
		{"empty array is absent", `{"resources":[{"exists":false}]}`, `{"resources":[]}`, true},
		{"empty object is absent", `{"a.b":[{"exists":false}]}`, `{"a":{}}`, true},
		{"object is not a value", `{"a":[{"exists":true}]}`, `{"a":{"b":1}}`, false},
		{"object is not absent", `{"a":[{"exists":false}]}`, `{"a":{"b":1}}`, true},

		// Values are typed.
		{"null", `{"a":[null]}`, `{"a":null}`, true},
		{"null is present", `{"a":[{"exists":true}]}`, `{"a":null}`, true},
		{"null is not absent", `{"a":[null]}`, `{"b":1}`, false},
		{"null is not the string", `{"a":["null"]}`, `{"a":null}`, false},
		{"true", `{"a":[true]}`, `{"a":true}`, true},
		{"true is not the string", `{"a":[true]}`, `{"a":"true"}`, false},
		{"false", `{"a":[false]}`, `{"a":false}`, true},
		{"number", `{"price_usd":[{"numeric":["=",301.5]}]}`, `{"price_usd":3.015e2}`, true},
		{"number exact", `{"price_usd":[301.5]}`, `{"price_usd":301.5}`, true},
		{"number is not the string", `{"p":[5]}`, `{"p":"5"}`, false},
		{"string is not the number", `{"p":["5"]}`, `{"p":5}`, false},
		{"numeric vs string", `{"p":[{"numeric":[">",0]}]}`, `{"p":"5"}`, false},
		{"numeric range", `{"p":[{"numeric":[">",0,"<=",150]}]}`, `{"p":150}`, true},
		{"anything-but null body value", `{"a":[{"anything-but":"x"}]}`, `{"a":null}`, true},
		{"escaped body string", `{"a":["say \"hi\""]}`, `{"a":"say \u0022hi\u0022"}`, true},
		{"escaped body key", `{"a b":["x"]}`, `{"a\u0020b":"x"}`, true},

		// IP addresses (test_filter_policy_ip_address_condition, AWS-validated).
		{"cidr v4", `{"detail":{"$or":[{"sourceIPAddress":[{"cidr":"10.0.0.0/24"}]},{"sourceIPAddressV6":[{"cidr":"2001:db8:1234:1a00::/64"}]}]}}`, `{"id":"1","detail":{"sourceIPAddress":"10.0.0.255"}}`, true},
		{"cidr v4 invalid", `{"detail":{"$or":[{"sourceIPAddress":[{"cidr":"10.0.0.0/24"}]},{"sourceIPAddressV6":[{"cidr":"2001:db8:1234:1a00::/64"}]}]}}`, `{"id":"2","detail":{"sourceIPAddress":"10.0.0.256"}}`, false},
		{"cidr v6", `{"detail":{"$or":[{"sourceIPAddress":[{"cidr":"10.0.0.0/24"}]},{"sourceIPAddressV6":[{"cidr":"2001:db8:1234:1a00::/64"}]}]}}`, `{"id":"3","detail":{"sourceIPAddressV6":"2001:0db8:1234:1a00:0000:0000:0000:0000"}}`, true},
		{"cidr v6 outside", `{"detail":{"$or":[{"sourceIPAddress":[{"cidr":"10.0.0.0/24"}]},{"sourceIPAddressV6":[{"cidr":"2001:db8:1234:1a00::/64"}]}]}}`, `{"id":"4","detail":{"sourceIPAddressV6":"2001:0db8:123f:1a01:0000:0000:0000:0000"}}`, false},

		// The large complex payload's shape: a dotted key nested under a key, into an array of objects.
		{"dotted key under a key, into an array", `{"detail":{"payload.nested.another-level.deep":{"inside-list":[{"prefix":"q-test"}]}}}`,
			`{"id":"1","detail":{"sourceHostname":"h","payload":{"nested":{"another-level":{"deep":[{"other":1},{"inside-list":"q-test-value"}]}}}}}`, true},

		// $or inside a key, operators in the alternatives (event-ruler's documented example).
		{"$or of numeric alternatives, third", `{"detail":{"$or":[{"c-count":[{"numeric":[">",0,"<=",5]}]},{"d-count":[{"numeric":["<",10]}]},{"x-limit":[{"numeric":["=",3.018e2]}]}]}}`, `{"detail":{"x-limit":301.8}}`, true},
		{"$or of numeric alternatives, first", `{"detail":{"$or":[{"c-count":[{"numeric":[">",0,"<=",5]}]},{"d-count":[{"numeric":["<",10]}]},{"x-limit":[{"numeric":["=",3.018e2]}]}]}}`, `{"detail":{"c-count":5,"d-count":10}}`, true},
		{"$or of numeric alternatives, none", `{"detail":{"$or":[{"c-count":[{"numeric":[">",0,"<=",5]}]},{"d-count":[{"numeric":["<",10]}]},{"x-limit":[{"numeric":["=",3.018e2]}]}]}}`, `{"detail":{"c-count":6,"d-count":10,"x-limit":301.81}}`, false},
		{"$or alternatives within one array element", `{"r":{"a":["1"],"$or":[{"b":["2"]},{"c":["3"]}]}}`, `{"r":[{"a":"1","b":"0"},{"a":"0","c":"3"}]}`, false},
		{"$or alternatives, one array element", `{"r":{"a":["1"],"$or":[{"b":["2"]},{"c":["3"]}]}}`, `{"r":[{"a":"1","b":"0"},{"a":"1","c":"3"}]}`, true},

		// Empty keys: paths are the keys joined with ".", nothing more (found by FuzzMatchBody).
		{"empty keys, two levels", `{"":{"$or":[{"":[""]},{"":[""]}]}}`, `{"":{"":""}}`, true},
		{"empty key is not the path of a nested value", `{"":[{"anything-but":{"prefix":"0"}}]}`, `{"":{"":[""]}}`, false},
		{"empty key at the top", `{"":["x"]}`, `{"":"x"}`, true},

		// Key limits count top-level keys only.
		{"many nested keys", `{"a":{"b":["1"],"c":["2"],"d":["3"],"e":["4"],"f":["5"],"g":["6"]}}`, `{"a":{"b":"1","c":"2","d":"3","e":"4","f":"5","g":"6"}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.policy, MessageBody)
			if got := p.MatchBody([]byte(tt.body)); got != tt.want {
				t.Errorf("MatchBody = %v, want %v", got, tt.want)
			}
			if got := p.Match(nil, tt.body); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
			if got := naiveMatchBody(p, tt.body); got != tt.want {
				t.Errorf("reference model = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMatchBodyOr is the AWS-validated $or body example: the five
// passing messages of the eleven published.
func TestMatchBodyOr(t *testing.T) {
	p := mustParse(t, orBodyPolicy, MessageBody)
	bodies := []struct {
		body string
		want bool
	}{
		{`{"metricName":"CPUUtilization","detail":{"scope":"aws.cloudwatch","type":"CloudWatch Alarm State Change"}}`, false},
		{`{"metricName":"CPUUtilization","detail":{"scope":"Service","type":"CPUUtilization"}}`, false},
		{`{"metricName":"CPUUtilization","detail":{"type":"CloudWatch Alarm State Change"}}`, false},
		{`{"metricName":"CPUUtilization","detail":{"scope":"Service"}}`, false},
		{`{"metricName":"CPUUtilization","scope":"Service"}`, false},
		{`{"metricName":"AWS/EC2","detail":{"scope":"Service","type":"CloudWatch Alarm State Change"}}`, false},
		{`{"namespace":"CPUUtilization","detail":{"scope":"Service","type":"CloudWatch Alarm State Change"}}`, false},
		{`{"metricName":"CPUUtilization","detail":{"scope":"Service","source":"aws.cloudwatch"}}`, true},
		{`{"metricName":"ReadLatency","detail":{"scope":"Service","source":"aws.cloudwatch"}}`, true},
		{`{"namespace":"AWS/EC2","detail":{"scope":"Service","source":"aws.cloudwatch"}}`, true},
		{`{"namespace":"AWS/ES","detail":{"scope":"Service","source":"aws.cloudwatch"}}`, true},
		{`{"metricName":"CPUUtilization","detail":{"scope":"Service","type":"CloudWatch Alarm State Change"}}`, true},
	}
	passed := 0
	for _, b := range bodies {
		got := p.MatchBody([]byte(b.body))
		if got != b.want {
			t.Errorf("MatchBody(%s) = %v, want %v", b.body, got, b.want)
		}
		if got {
			passed++
		}
	}
	if passed != 5 {
		t.Errorf("%d messages passed, AWS delivered 5", passed)
	}
}

// TestParseBodyOnce: one parsed body serves every policy.
func TestParseBodyOnce(t *testing.T) {
	b := ParseBody(s3Event("ObjectCreated:Put", "auto-1.xml"))
	if b == nil {
		t.Fatal("ParseBody refused an object")
	}
	for policy, want := range map[string]bool{
		s3Policy:                                        true,
		`{"Records":{"eventSource":["aws:s3"]}}`:        true,
		`{"Records":{"eventSource":["aws:sqs"]}}`:       false,
		`{"Records":{"s3":{"object":{"size":[17]}}}}`:   true,
		`{"Records":{"s3":{"object":{"size":["17"]}}}}`: false,
	} {
		if got := mustParse(t, policy, MessageBody).MatchParsedBody(b); got != want {
			t.Errorf("%s: MatchParsedBody = %v, want %v", policy, got, want)
		}
	}
	for _, notObject := range []string{"", "x", "[]", `"s"`, "1", "null", `{"a":1} x`} {
		if ParseBody(notObject) != nil {
			t.Errorf("ParseBody(%q) accepted a non-object", notObject)
		}
	}
}

// TestMatchBodyChoiceBudget: where duplicate keys give leaves several
// routes, a match is found without trying every assignment, and a search
// that would explode stops at the budget.
func TestMatchBodyChoiceBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"a":{`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"b":{"c":%d,"d":%d}`, i, 1000+i)
	}
	b.WriteString(`}}`)
	body := []byte(b.String())
	// Met by two different duplicates, the last and the first.
	if !mustParse(t, `{"a":{"b":{"c":[199],"d":[1000]}}}`, MessageBody).MatchBody(body) {
		t.Error("no match across duplicate keys")
	}
	// Met by one duplicate, both leaves together.
	if !mustParse(t, `{"a":{"b":{"c":[150],"d":[1150]}}}`, MessageBody).MatchBody(body) {
		t.Error("no match within one duplicate")
	}
	if mustParse(t, `{"a":{"b":{"c":[5000],"d":[1000]}}}`, MessageBody).MatchBody(body) {
		t.Error("match of an absent value")
	}

	// 16 leaves, each met alone in either of two duplicate arrays, but no
	// two in one array: 2^16 assignments, all failing.
	var keys, elems []string
	for i := range 16 {
		keys = append(keys, fmt.Sprintf(`"b.x%d":[1]`, i))
		elems = append(elems, fmt.Sprintf(`{"x%d":1}`, i))
	}
	policy := `{"$or":[{` + strings.Join(keys, ",") + `},{"zz":["never"]}]}`
	arr := "[" + strings.Join(elems, ",") + "]"
	exploding := `{"b":` + arr + `,"b":` + arr + `}`
	p := mustParse(t, policy, MessageBody)
	if p.MatchBody([]byte(exploding)) {
		t.Error("match of an unsatisfiable policy")
	}
	if naiveMatchBody(p, exploding) {
		t.Error("reference model matched an unsatisfiable policy")
	}
}

// TestSharedPolicy: a Policy is immutable, so goroutines may share it
// (run with -race).
func TestSharedPolicy(t *testing.T) {
	p := mustParse(t, orBodyPolicy, MessageBody)
	a := mustParse(t, `{"a":[{"prefix":"x"}],"l":["y"]}`, MessageAttributes)
	body := []byte(`{"namespace":"AWS/ES","detail":{"scope":"Service","source":"aws.cloudwatch"}}`)
	attributes := map[string]Attribute{"a": str("xy"), "l": list(`["y"]`)}
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for range 200 {
				ok = ok && p.MatchBody(body) && a.MatchAttributes(attributes)
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("a shared policy stopped matching")
		}
	}
}
