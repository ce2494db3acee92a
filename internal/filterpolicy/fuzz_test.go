package filterpolicy

import (
	"errors"
	"testing"
)

// policySeeds are policies for the fuzzers to start from: every operator,
// the AWS examples, and near-misses of the grammar.
var policySeeds = []string{
	``,
	`{}`,
	`{"a":["x"]}`,
	`{"a":["x",1,3.015e2,true,false,null]}`,
	`{"a":[{"prefix":"p"},{"suffix":"s"},{"equals-ignore-case":"E"}]}`,
	`{"a":[{"anything-but":"x"},{"anything-but":["x","y"]},{"anything-but":[1,2]},{"anything-but":{"prefix":"o-"}}]}`,
	`{"p":[{"numeric":["=",301.5]},{"numeric":[">",0,"<=",150]},{"numeric":["<",-1e9]}]}`,
	`{"a":[{"exists":true}],"b":[{"exists":false}]}`,
	`{"ip":[{"cidr":"10.0.0.0/24"},{"cidr":"2001:db8:1234:1a00::/64"}]}`,
	`{"ip":["2001:db8::1"]}`,
	`{"source":["aws.cloudwatch"],"$or":[{"metricName":["CPUUtilization"]},{"namespace":["AWS/EC2"]}]}`,
	orPolicy150,
	orPolicy152,
	orPolicy160,
	orBodyPolicy,
	s3Policy,
	`{"object.nested.test":["string.value"]}`,
	`{"headers":{"route-to":["queue1"]}}`,
	`{"$or":[{"numeric":123},{"prefix":"abc"}]}`,
	`{"$or":{"a":["x"]}}`,
	`{"a":{"b":{"c":["x"]},"d":[{"exists":false}]}}`,
	`{"key":[{"numeric":[">",20,"<",30,"<",50]}]}`,
	`{"key":[{"anything-but":{"suffix":"test"}}]}`,
	`{"key":[{"cidr":"bad-/64filter"}]}`,
	`{"key":[["value"]]}`,
	`{"a":["\u00e9\ud83d\ude00\"\\"]}`,
	`{"a":`,
	`[1]`,
}

// bodySeeds are bodies to match.
var bodySeeds = []string{
	`{"a":"x"}`,
	`{"a":["x",1,true,null,{"b":"y"}]}`,
	`{"a":{"b":{"c":"x"}},"a.b":{"c":"y"},"a.b.c":1}`,
	`{"Records":[{"eventName":"ObjectCreated:Put","s3":{"object":[[{"key":"auto-1"}]]}},{"eventName":"ObjectRemoved:Delete","s3":{"object":{"key":"home-1"}}}]}`,
	`{"metricName":"CPUUtilization","detail":{"scope":"Service","source":"aws.cloudwatch"}}`,
	`{"headers":{"route-to":["queue1","queue2"]}}`,
	`{"resources":[],"detail":{"eventVersion":"","responseElements":null}}`,
	`{"ip":"10.0.0.255","p":3.015e2}`,
	`{"a":1,"a":2,"a":{"b":[]}}`,
	`not json`,
	`[]`,
}

// FuzzParse: any policy is accepted or refused with an *Error carrying a
// reason, never a panic; an accepted policy evaluates any message.
func FuzzParse(f *testing.F) {
	for _, p := range policySeeds {
		f.Add(p, false)
		f.Add(p, true)
	}
	f.Fuzz(func(t *testing.T, policy string, body bool) {
		scope := MessageAttributes
		if body {
			scope = MessageBody
		}
		p, err := Parse(policy, scope)
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) || perr.Reason == "" {
				t.Fatalf("Parse error %v (%T) is not an *Error with a reason", err, err)
			}
			if p != nil {
				t.Fatal("Parse returned a policy and an error")
			}
			_ = perr.Message(Subscribe)
			_ = perr.Message(SetSubscriptionAttributes)
			return
		}
		if p == nil {
			return
		}
		if p.Scope() != scope {
			t.Fatalf("scope %v, want %v", p.Scope(), scope)
		}
		if len(p.branches) == 0 || len(p.branches) > MaxCombinations {
			t.Fatalf("%d branches", len(p.branches))
		}
		for _, b := range bodySeeds {
			p.MatchBody([]byte(b))
		}
		p.MatchAttributes(map[string]Attribute{"a": {Type: "String", Value: "x"}, "p": {Type: "Number", Value: "3"}, "l": {Type: "String.Array", Value: `["x",1]`}})
	})
}

// FuzzMatchBody: matching any body against any policy does not panic,
// and on bodies small enough for it the tree walk agrees with the naive
// reference model.
func FuzzMatchBody(f *testing.F) {
	for _, p := range policySeeds {
		for _, b := range bodySeeds {
			f.Add(p, b)
		}
	}
	f.Fuzz(func(t *testing.T, policy, body string) {
		p, err := Parse(policy, MessageBody)
		if err != nil {
			return
		}
		got := p.MatchBody([]byte(body))
		if got != p.MatchParsedBody(ParseBody(body)) {
			t.Fatal("MatchBody and MatchParsedBody disagree")
		}
		if len(body) > 512 {
			return
		}
		want, ok := naiveMatchBodyOK(p, body)
		if ok && got != want {
			t.Fatalf("MatchBody = %v, reference model = %v\npolicy %s\nbody   %s", got, want, policy, body)
		}
	})
}

// FuzzMatchAttributes: matching any attributes against any policy does
// not panic.
func FuzzMatchAttributes(f *testing.F) {
	types := []string{"String", "Number", "String.Array", "Binary", "Number.x", "String.custom", "Bogus"}
	for _, p := range policySeeds {
		for i, v := range []string{"x", "3.015e2", `["x",1,true,null,[2]]`, "AgME", "10.0.0.1", "['a']", `[]`} {
			f.Add(p, "a", types[i%len(types)], v)
		}
	}
	f.Fuzz(func(t *testing.T, policy, name, typ, value string) {
		p, err := Parse(policy, MessageAttributes)
		if err != nil {
			return
		}
		attrs := map[string]Attribute{name: {Type: typ, Value: value}, "p": {Type: typ, Value: value}}
		if p.MatchAttributes(attrs) != p.Match(attrs, "") {
			t.Fatal("MatchAttributes and Match disagree")
		}
	})
}
