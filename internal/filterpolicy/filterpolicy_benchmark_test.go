package filterpolicy

import "testing"

// Benchmarks of the publish path: every subscription's policy is
// evaluated on every publish. Run with -benchmem; compare runs side by
// side (benchstat), there are no timed assertions.

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(orPolicy150, MessageAttributes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMatchAttributes(b *testing.B) {
	p := mustParse(b, `{"store":["example_corp"],"event":[{"anything-but":"order_cancelled"}],
		"customer_interests":["rugby","football","baseball"],"price_usd":[{"numeric":[">=",100]}],
		"encrypted":[false]}`, MessageAttributes)
	attrs := map[string]Attribute{
		"store":              {Type: "String", Value: "example_corp"},
		"event":              {Type: "String", Value: "order_placed"},
		"customer_interests": {Type: "String.Array", Value: `["soccer","rugby"]`},
		"price_usd":          {Type: "Number", Value: "210.75"},
		"encrypted":          {Type: "String.Array", Value: `[false]`},
		"unrelated":          {Type: "Binary", Value: "AgME"},
	}
	if !p.MatchAttributes(attrs) {
		b.Fatal("no match")
	}
	b.ReportAllocs()
	for b.Loop() {
		p.MatchAttributes(attrs)
	}
}

func BenchmarkMatchAttributesNoArray(b *testing.B) {
	p := mustParse(b, `{"store":["example_corp"],"price_usd":[{"numeric":[">=",100]}],"$or":[{"a":["x"]},{"b":[{"prefix":"y"}]}]}`, MessageAttributes)
	attrs := map[string]Attribute{
		"store":     {Type: "String", Value: "example_corp"},
		"price_usd": {Type: "Number", Value: "210.75"},
		"b":         {Type: "String", Value: "yes"},
	}
	if !p.MatchAttributes(attrs) {
		b.Fatal("no match")
	}
	b.ReportAllocs()
	for b.Loop() {
		p.MatchAttributes(attrs)
	}
}

func BenchmarkMatchBody(b *testing.B) {
	p := mustParse(b, s3Policy, MessageBody)
	body := []byte(s3Event("ObjectCreated:Put", "auto-insurance-2314.xml"))
	if !p.MatchBody(body) {
		b.Fatal("no match")
	}
	b.ReportAllocs()
	for b.Loop() {
		p.MatchBody(body)
	}
}

// BenchmarkMatchParsedBody is the cost per subscription when a publish
// parses the body once for all of them.
func BenchmarkMatchParsedBody(b *testing.B) {
	p := mustParse(b, orBodyPolicy, MessageBody)
	body := ParseBody(`{"namespace":"AWS/ES","detail":{"scope":"Service","source":"aws.cloudwatch","other":[1,2,3]}}`)
	if !p.MatchParsedBody(body) {
		b.Fatal("no match")
	}
	b.ReportAllocs()
	for b.Loop() {
		p.MatchParsedBody(body)
	}
}
