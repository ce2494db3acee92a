package filterpolicy

import (
	"testing"
)

func mustParse(t testing.TB, policy string, scope Scope) *Policy {
	t.Helper()
	p, err := Parse(policy, scope)
	if err != nil {
		t.Fatalf("Parse(%s): %v", policy, err)
	}
	return p
}

func str(v string) Attribute  { return Attribute{Type: "String", Value: v} }
func num(v string) Attribute  { return Attribute{Type: "Number", Value: v} }
func list(v string) Attribute { return Attribute{Type: "String.Array", Value: v} }
func bin(v string) Attribute  { return Attribute{Type: "Binary", Value: v} }

type attrs = map[string]Attribute

func TestMatchAttributes(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		attrs  attrs
		want   bool
	}{
		// Exact strings: case-sensitive; values ORed; keys ANDed; other attributes ignored.
		{"exact", `{"a":["rugby","tennis"]}`, attrs{"a": str("rugby")}, true},
		{"exact second value", `{"a":["rugby","tennis"]}`, attrs{"a": str("tennis")}, true},
		{"exact miss", `{"a":["rugby","tennis"]}`, attrs{"a": str("baseball")}, false},
		{"exact case-sensitive", `{"a":["rugby"]}`, attrs{"a": str("Rugby")}, false},
		{"exact missing attribute", `{"a":["rugby"]}`, attrs{"b": str("rugby")}, false},
		{"exact no attributes", `{"a":["rugby"]}`, nil, false},
		{"other attributes ignored", `{"a":["rugby"]}`, attrs{"a": str("rugby"), "b": str("x")}, true},
		{"keys ANDed", `{"a":["rugby"],"p":[{"numeric":[">",100]}]}`, attrs{"a": str("rugby"), "p": num("101")}, true},
		{"keys ANDed, one fails", `{"a":["rugby"],"p":[{"numeric":[">",100]}]}`, attrs{"a": str("rugby"), "p": num("100")}, false},
		{"keys ANDed, one missing", `{"a":["rugby"],"p":[{"numeric":[">",100]}]}`, attrs{"a": str("rugby")}, false},
		{"empty string", `{"a":[""]}`, attrs{"a": str("")}, true},
		{"escaped policy string", `{"a":["say \"hi\" \\ o/"]}`, attrs{"a": str(`say "hi" \ o/`)}, true},
		{"unicode", `{"a":["\u00e9t\u00e9"]}`, attrs{"a": str("été")}, true},

		// Exact numbers: numeric equality, typed.
		{"number equal", `{"p":[301.5]}`, attrs{"p": num("301.5")}, true},
		{"number exponent", `{"p":[301.5]}`, attrs{"p": num("3.015e2")}, true},
		{"number policy exponent", `{"p":[3.015e2]}`, attrs{"p": num("301.50")}, true},
		{"number integer forms", `{"p":[100]}`, attrs{"p": num("1E2")}, true},
		{"number miss", `{"p":[100]}`, attrs{"p": num("100.1")}, false},
		{"number vs String attribute", `{"p":[100]}`, attrs{"p": str("100")}, false},
		{"string vs Number attribute", `{"p":["100"]}`, attrs{"p": num("100")}, false},
		{"number out of range by text", `{"account":[123456789012]}`, attrs{"account": num("123456789012")}, true},
		{"number out of range, other text", `{"account":[123456789012]}`, attrs{"account": num("123456789013")}, false},
		{"number custom type", `{"p":[5]}`, attrs{"p": {Type: "Number.float", Value: "5.0"}}, true},

		// true, false, null: only JSON values (String.Array elements), never a String or a missing attribute.
		{"true vs String", `{"a":[true]}`, attrs{"a": str("true")}, false},
		{"true in array", `{"a":[true]}`, attrs{"a": list(`[true]`)}, true},
		{"false in array", `{"a":[false]}`, attrs{"a": list(`["x",false]`)}, true},
		{"null in array", `{"a":[null]}`, attrs{"a": list(`[null]`)}, true},
		{"null vs missing (AWS-recorded)", `{"attr1":[null,{"anything-but":"whatever"}]}`, nil, false},
		{"null vs String null", `{"a":[null]}`, attrs{"a": str("null")}, false},

		// prefix, suffix, equals-ignore-case.
		{"prefix", `{"a":[{"prefix":"bas"}]}`, attrs{"a": str("baseball")}, true},
		{"prefix basketball", `{"a":[{"prefix":"bas"}]}`, attrs{"a": str("basketball")}, true},
		{"prefix miss", `{"a":[{"prefix":"bas"}]}`, attrs{"a": str("rugby")}, false},
		{"prefix vs Number", `{"a":[{"prefix":"1"}]}`, attrs{"a": num("100")}, false},
		{"suffix", `{"a":[{"suffix":"pe1"}]}`, attrs{"a": str("type1")}, true},
		{"suffix miss", `{"a":[{"suffix":"test"}]}`, attrs{"a": str("type2")}, false},
		{"equals-ignore-case", `{"a":[{"equals-ignore-case":"TYPE1"}]}`, attrs{"a": str("type1")}, true},
		{"equals-ignore-case miss", `{"a":[{"equals-ignore-case":"TYPE1"}]}`, attrs{"a": str("type2")}, false},
		{"equals-ignore-case unicode", `{"a":[{"equals-ignore-case":"ÉTÉ"}]}`, attrs{"a": str("été")}, true},

		// anything-but.
		{"anything-but value", `{"a":[{"anything-but":"type1"}]}`, attrs{"a": str("type2")}, true},
		{"anything-but value hit", `{"a":[{"anything-but":"type1"}]}`, attrs{"a": str("type1")}, false},
		{"anything-but list", `{"a":[{"anything-but":["rugby","tennis"]}]}`, attrs{"a": str("football")}, true},
		{"anything-but list hit", `{"a":[{"anything-but":["rugby","tennis"]}]}`, attrs{"a": str("rugby")}, false},
		{"anything-but list, array with another value", `{"a":[{"anything-but":["rugby","tennis"]}]}`, attrs{"a": list(`["rugby","baseball"]`)}, true},
		{"anything-but list, array of listed values", `{"a":[{"anything-but":["rugby","tennis"]}]}`, attrs{"a": list(`["rugby"]`)}, false},
		{"anything-but needs the attribute", `{"a":[{"anything-but":"x"}]}`, attrs{"b": str("y")}, false},
		{"anything-but numbers", `{"p":[{"anything-but":[100,500]}]}`, attrs{"p": num("101")}, true},
		{"anything-but numbers 100.1", `{"p":[{"anything-but":[100,500]}]}`, attrs{"p": num("100.1")}, true},
		{"anything-but numbers hit", `{"p":[{"anything-but":[100,500]}]}`, attrs{"p": num("100")}, false},
		{"anything-but numbers hit by value", `{"p":[{"anything-but":[100,500]}]}`, attrs{"p": num("1e2")}, false},
		{"anything-but numbers, array", `{"p":[{"anything-but":[100,500]}]}`, attrs{"p": list(`[100, 50]`)}, true},
		{"anything-but number scalar", `{"p":[{"anything-but":5}]}`, attrs{"p": num("5")}, false},
		{"anything-but numbers vs String", `{"p":[{"anything-but":[100]}]}`, attrs{"p": str("100")}, true},
		{"anything-but strings vs Number", `{"p":[{"anything-but":["100"]}]}`, attrs{"p": num("100")}, true},
		{"anything-but prefix", `{"e":[{"anything-but":{"prefix":"order-"}}]}`, attrs{"e": str("data-entry")}, true},
		{"anything-but prefix underscore", `{"e":[{"anything-but":{"prefix":"order-"}}]}`, attrs{"e": str("order_number")}, true},
		{"anything-but prefix hit", `{"e":[{"anything-but":{"prefix":"order-"}}]}`, attrs{"e": str("order-cancelled")}, false},
		{"two anything-buts ORed", `{"a":[{"anything-but":"type1"},{"anything-but":"type2"}]}`, attrs{"a": str("type2")}, true},

		// numeric.
		{"numeric =", `{"p":[{"numeric":["=",301.5]}]}`, attrs{"p": num("301.5")}, true},
		{"numeric = exponent", `{"p":[{"numeric":["=",301.5]}]}`, attrs{"p": num("3.015e2")}, true},
		{"numeric = miss", `{"p":[{"numeric":["=",300]}]}`, attrs{"p": num("301")}, false},
		{"numeric >", `{"p":[{"numeric":[">",300]}]}`, attrs{"p": num("301")}, true},
		{"numeric > equal", `{"p":[{"numeric":[">",300]}]}`, attrs{"p": num("300")}, false},
		{"numeric >=", `{"p":[{"numeric":[">=",300]}]}`, attrs{"p": num("300")}, true},
		{"numeric >= below", `{"p":[{"numeric":[">=",300]}]}`, attrs{"p": num("299.99999")}, false},
		{"numeric <", `{"p":[{"numeric":["<",0]}]}`, attrs{"p": num("-0.5")}, true},
		{"numeric < zero", `{"p":[{"numeric":["<",0]}]}`, attrs{"p": num("0")}, false},
		{"numeric <=", `{"p":[{"numeric":["<=",300]}]}`, attrs{"p": num("300")}, true},
		{"numeric <= above", `{"p":[{"numeric":["<=",300]}]}`, attrs{"p": num("300.00001")}, false},
		{"numeric range inside", `{"p":[{"numeric":[">",0,"<=",150]}]}`, attrs{"p": num("150")}, true},
		{"numeric range low edge", `{"p":[{"numeric":[">",0,"<=",150]}]}`, attrs{"p": num("0")}, false},
		{"numeric range above", `{"p":[{"numeric":[">",0,"<=",150]}]}`, attrs{"p": num("200")}, false},
		{"numeric range negative", `{"p":[{"numeric":[">",0,"<=",150]}]}`, attrs{"p": num("-1")}, false},
		{"numeric range closed low", `{"p":[{"numeric":[">=",0,"<",1]}]}`, attrs{"p": num("0")}, true},
		{"numeric range open top", `{"p":[{"numeric":[">=",0,"<",1]}]}`, attrs{"p": num("1")}, false},
		{"numeric vs String", `{"p":[{"numeric":["=",300]}]}`, attrs{"p": str("300")}, false},
		{"numeric vs bad Number", `{"p":[{"numeric":[">",0]}]}`, attrs{"p": num("test")}, false},
		{"numeric value above 1e9", `{"p":[{"numeric":[">",0]}]}`, attrs{"p": num("1000000000.00001")}, false},
		{"numeric value 1e9", `{"p":[{"numeric":[">",0]}]}`, attrs{"p": num("1e9")}, true},
		{"numeric value -1e9", `{"p":[{"numeric":["<",0]}]}`, attrs{"p": num("-1000000000")}, true},
		{"numeric five decimals", `{"p":[{"numeric":["=",1.00001]}]}`, attrs{"p": num("1.00001")}, true},
		{"numeric sixth decimal ignored", `{"p":[{"numeric":["=",1.00001]}]}`, attrs{"p": num("1.000019")}, true},
		{"numeric fifth decimal counts", `{"p":[{"numeric":["=",1.00001]}]}`, attrs{"p": num("1.00002")}, false},
		{"numeric plus sign", `{"p":[{"numeric":["=",5]}]}`, attrs{"p": num("+5")}, true},
		{"numeric in array", `{"p":[{"numeric":[">",10]}]}`, attrs{"p": list(`["x",5,11]`)}, true},
		{"multiple numeric ORed", `{"p":[{"numeric":["=",300]},{"numeric":["=",500]}]}`, attrs{"p": num("500")}, true},

		// exists.
		{"exists true", `{"store":[{"exists":true}]}`, attrs{"store": num("99"), "def": num("99")}, true},
		{"exists true missing", `{"store":[{"exists":true}]}`, attrs{"attr1": num("111")}, false},
		{"exists false missing", `{"store":[{"exists":false}]}`, attrs{"def": num("99")}, true},
		{"exists false present", `{"store":[{"exists":false}]}`, attrs{"store": num("99"), "def": num("99")}, false},
		{"exists false no attributes", `{"store":[{"exists":false}]}`, nil, true},
		{"exists false or value, absent", `{"a":[{"exists":false},"x"]}`, nil, true},
		{"exists false or value, value", `{"a":[{"exists":false},"x"]}`, attrs{"a": str("x")}, true},
		{"exists false or value, other", `{"a":[{"exists":false},"x"]}`, attrs{"a": str("y")}, false},
		{"exists true String.Array", `{"a":[{"exists":true}]}`, attrs{"a": list(`["x"]`)}, true},

		// cidr.
		{"cidr v4 low", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, attrs{"ip": str("10.0.0.0")}, true},
		{"cidr v4 high", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, attrs{"ip": str("10.0.0.255")}, true},
		{"cidr v4 outside", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, attrs{"ip": str("10.1.1.0")}, false},
		{"cidr v4 next", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, attrs{"ip": str("10.0.1.255")}, false},
		{"cidr v4 invalid address", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, attrs{"ip": str("10.0.0.256")}, false},
		{"cidr not an address", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, attrs{"ip": str("host")}, false},
		{"cidr unmasked base", `{"ip":[{"cidr":"10.0.0.77/24"}]}`, attrs{"ip": str("10.0.0.1")}, true},
		{"cidr v6", `{"ip":[{"cidr":"2001:db8:1234:1a00::/64"}]}`, attrs{"ip": str("2001:0db8:1234:1a00:0000:0000:0000:0000")}, true},
		{"cidr v6 short form", `{"ip":[{"cidr":"2001:db8:1234:1a00::/64"}]}`, attrs{"ip": str("2001:db8:1234:1a00::ffff")}, true},
		{"cidr v6 outside", `{"ip":[{"cidr":"2001:db8:1234:1a00::/64"}]}`, attrs{"ip": str("2001:0db8:123f:1a01:0000:0000:0000:0000")}, false},
		{"cidr v4 address vs v6 range", `{"ip":[{"cidr":"::/0"}]}`, attrs{"ip": str("10.0.0.1")}, false},
		{"cidr v4-mapped v6 address", `{"ip":[{"cidr":"10.0.0.0/8"}]}`, attrs{"ip": str("::ffff:a00:1")}, true},
		{"cidr vs Number", `{"ip":[{"cidr":"0.0.0.0/0"}]}`, attrs{"ip": num("1")}, false},
		{"exact IP matches another spelling", `{"ip":["2001:db8::1"]}`, attrs{"ip": str("2001:0db8:0:0:0:0:0:1")}, true},
		{"exact IP other address", `{"ip":["2001:db8::1"]}`, attrs{"ip": str("2001:db8::2")}, false},

		// String.Array.
		{"array element", `{"a":["soccer"]}`, attrs{"a": list(`["soccer","rugby","hockey"]`)}, true},
		{"array any element", `{"a":["soccer","basketball"]}`, attrs{"a": list(`["soccer","rugby","hockey"]`)}, true},
		{"array no element", `{"a":["volleyball","basketball"]}`, attrs{"a": list(`["soccer","rugby","hockey"]`)}, false},
		{"array prefix", `{"a":[{"prefix":"soc"}]}`, attrs{"a": list(`["soccer","rugby"]`)}, true},
		{"array suffix", `{"a":[{"suffix":"gby"}]}`, attrs{"a": list(`["soccer","rugby"]`)}, true},
		{"array equals-ignore-case", `{"a":[{"equals-ignore-case":"RuGbY"}]}`, attrs{"a": list(`["soccer","rugby"]`)}, true},
		{"array (AWS-recorded)", `{"store":["value1"]}`, attrs{"store": list(`["value1", "value2"]`)}, true},
		{"array miss (AWS-recorded)", `{"store":["value1"]}`, attrs{"store": list(`["value2", "value3"]`)}, false},
		{"array not JSON", `{"a":["anything"]}`, attrs{"a": list(`['anything']`)}, false},
		{"array not JSON, exists", `{"a":[{"exists":true}]}`, attrs{"a": list(`['anything']`)}, false},
		{"array not an array", `{"a":["x"]}`, attrs{"a": list(`"x"`)}, false},
		{"array empty is absent", `{"a":[{"exists":false}]}`, attrs{"a": list(`[]`)}, true},
		{"array empty, exists true", `{"a":[{"exists":true}]}`, attrs{"a": list(`[]`)}, false},
		{"array empty, anything-but", `{"a":[{"anything-but":"x"}]}`, attrs{"a": list(`[]`)}, false},
		{"array nested arrays", `{"a":["x"]}`, attrs{"a": list(`[["y",["x"]]]`)}, true},
		{"array objects never match", `{"a":[{"exists":true}]}`, attrs{"a": list(`[{"a":"x"}]`)}, false},
		{"array number", `{"a":[5]}`, attrs{"a": list(`[5.0]`)}, true},
		{"array number is not a string", `{"a":["5"]}`, attrs{"a": list(`[5]`)}, false},
		{"array several keys", `{"a":["x"],"b":["y"]}`, attrs{"a": list(`["x"]`), "b": list(`["z","y"]`)}, true},

		// Binary and unknown types are ignored.
		{"binary ignored", `{"a":["AgME"]}`, attrs{"a": bin("AgME")}, false},
		{"binary is absent", `{"a":[{"exists":false}]}`, attrs{"a": bin("AgME")}, true},
		{"binary custom type is absent", `{"a":[{"exists":true}]}`, attrs{"a": {Type: "Binary.png", Value: "AgME"}}, false},
		{"unknown type is absent", `{"a":[{"exists":false}]}`, attrs{"a": {Type: "Stringprefixed", Value: "x"}}, true},
		{"String custom type", `{"a":["x"]}`, attrs{"a": {Type: "String.custom", Value: "x"}}, true},
		{"String.Array custom label is a String", `{"a":["[\"x\"]"]}`, attrs{"a": {Type: "String.Array.x", Value: `["x"]`}}, true},

		// $or (AWS docs and LocalStack's matrix).
		{"$or first", `{"source":["aws.cloudwatch"],"$or":[{"metricName":["CPUUtilization"]},{"namespace":["AWS/EC2"]}]}`, attrs{"source": str("aws.cloudwatch"), "metricName": str("CPUUtilization")}, true},
		{"$or second", `{"source":["aws.cloudwatch"],"$or":[{"metricName":["CPUUtilization"]},{"namespace":["AWS/EC2"]}]}`, attrs{"source": str("aws.cloudwatch"), "namespace": str("AWS/EC2")}, true},
		{"$or neither", `{"source":["aws.cloudwatch"],"$or":[{"metricName":["CPUUtilization"]},{"namespace":["AWS/EC2"]}]}`, attrs{"source": str("aws.cloudwatch"), "namespace": str("AWS/ES")}, false},
		{"$or sibling fails", `{"f1":["v1"],"$or":[{"f2":["v2"]},{"f3":["v3"]}]}`, attrs{"f1": str("v2"), "f3": str("v3")}, false},
		{"$or nested", `{"f1":["v1"],"$or":[{"f2":["v2","v3"]},{"f3":["v4"],"$or":[{"f4":["v5","v6"]},{"f5":["v7","v8"]}]}]}`, attrs{"f1": str("v1"), "f3": str("v4"), "f4": str("v6")}, true},
		{"$or nested, inner fails", `{"f1":["v1"],"$or":[{"f2":["v2","v3"]},{"f3":["v4"],"$or":[{"f4":["v5","v6"]},{"f5":["v7","v8"]}]}]}`, attrs{"f1": str("v1"), "f3": str("v4"), "f4": str("v7")}, false},
		{"$or of operators is an attribute", `{"$or":[{"prefix":"a"},{"suffix":"b"}]}`, attrs{"$or": str("xb")}, true},
		{"$or key repeated in a branch, last wins", `{"a":["x"],"$or":[{"a":["y"]},{"b":["z"]}]}`, attrs{"a": str("y")}, true},
		{"$or key repeated, other branch keeps it", `{"a":["x"],"$or":[{"a":["y"]},{"b":["z"]}]}`, attrs{"a": str("x"), "b": str("z")}, true},
		{"duplicate JSON key, last wins", `{"a":["x"],"a":["y"]}`, attrs{"a": str("y")}, true},
		{"duplicate JSON key, first is gone", `{"a":["x"],"a":["y"]}`, attrs{"a": str("x")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.policy, MessageAttributes)
			if got := p.MatchAttributes(tt.attrs); got != tt.want {
				t.Errorf("MatchAttributes = %v, want %v", got, tt.want)
			}
			if got := p.Match(tt.attrs, `{"unused":1}`); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}
