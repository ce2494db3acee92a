// Package filterpolicy parses, validates and evaluates Amazon SNS
// subscription filter policies (the FilterPolicy and FilterPolicyScope
// subscription attributes), so that a topic delivers a message only to the
// subscriptions whose policy admits it.
//
// Parse validates a policy the way SNS does and returns an *Error whose
// Error() is AWS's reason text ("Filter policy can not have more than 5
// keys", "Unrecognized match type X", "Value of >= must be numeric", ...);
// Error.Message renders the full InvalidParameter message for Subscribe or
// SetSubscriptionAttributes. The compiled *Policy is immutable and is
// evaluated with MatchAttributes (scope MessageAttributes), MatchBody or
// MatchParsedBody (scope MessageBody), or Match (by the policy's scope).
// A nil *Policy admits everything: a subscription without a policy
// receives every message. Evaluation allocates little: a publish
// evaluates every subscription's policy, so a body can be parsed once
// (ParseBody) for all of them.
//
// The package owns the policy language only. It must not know about
// topics, subscriptions or delivery, and has no state beyond the policies
// it returns; storing the policy text (GetSubscriptionAttributes returns
// it verbatim) and re-validating a policy when FilterPolicyScope changes
// are the caller's.
//
// # What AWS behaviour it follows
//
// The sources, in order of authority: AWS's error messages and delivery
// results recorded by LocalStack's AWS-validated tests (2024-05 to
// 2025-03), the AWS developer guide (filter policy constraints, string,
// numeric and key matching, AND/OR logic, removing a policy), and, where
// neither says, AWS's open-source event-ruler, whose rule compiler SNS's
// reasons come from word for word.
//
//   - Keys are ANDed, the values listed for a key are ORed, attributes or
//     properties not named in the policy are ignored.
//   - Exact values: strings (case-sensitive), numbers (compared by value,
//     3.015e2 = 301.5; a number outside ±10^9 by its text), true, false,
//     null. null does not match a missing key.
//   - Operators: prefix, suffix, equals-ignore-case, anything-but (a
//     value, a list of strings or of numbers, or {"prefix": ...}),
//     numeric (=, <, <=, >, >=, and a range [">"|">=", lo, "<"|"<=", hi])
//     with values within ±10^9 and five decimal places, exists (false
//     matches a missing key), cidr (IPv4 and IPv6), and $or.
//   - $or is an OR only when its value is an array of at least two
//     objects with no reserved keyword as a key; otherwise "$or" is an
//     ordinary key (AWS documents this). It nests, and combines with its
//     sibling keys.
//   - Limits: 5 top-level keys; complexity 150, the product over keys of
//     the number of values times the key's nesting depth, $or
//     alternatives adding up (AWS's documented 72 and its recorded 150
//     accepted, 152 and 160 refused); 256 KB.
//   - Scope MessageAttributes: String, Number and String.Array attributes
//     are compared, Binary ones are ignored; a custom type ("Number.x")
//     counts as its base type; a String.Array is parsed as JSON and
//     matched element by element, and one that is not valid JSON matches
//     nothing. Nested policies are refused.
//   - Scope MessageBody: the body must be a JSON object; nested keys and
//     dotted keys name the same paths; arrays are traversed, the
//     conditions that reach into one array being met within one element;
//     an empty array is no value. See body.go.
//   - "" and "{}" are no policy (Parse returns nil, nil): AWS removes a
//     policy set to "" (recorded) and documents "{}" for removing one.
//
// # What is uncertain
//
// These follow event-ruler or a reasoned choice, because AWS's answer is
// not recorded:
//
//   - Matching is typed, as in AWS's rule engine: a policy string never
//     matches a Number attribute or a JSON number, a policy number never
//     matches a string, and prefix/suffix/equals-ignore-case/cidr apply to
//     strings only. anything-but accepts any value it cannot prove equal
//     (so {"anything-but": ["a"]} accepts a number).
//   - Numbers carry five decimal places and are truncated (floored)
//     beyond; an operator's number outside ±10^9 is refused with
//     "Value must be between -1.0E9 and 1.0E9, inclusive" (event-ruler's
//     wording, SNS's bound). A message number outside the range never
//     matches a numeric condition.
//   - anything-but accepts only {"prefix": ...} as a nested operator
//     (suffix and exists are AWS-refused; equals-ignore-case and wildcard
//     are refused here too). "wildcard" and "exactly" are not operators
//     ("Unrecognized match type").
//   - cidr follows event-ruler: a mask of /32 (IPv4) or /128 (IPv6) is
//     refused, as are IPv6 zones and embedded IPv4 ("::ffff:1.2.3.4").
//     An exact string that is an IP literal also matches the same address
//     written differently.
//   - The "$or" reserved-keyword test looks at every key inside the
//     alternatives (event-ruler); AWS documents only "field names".
//   - The 5-key count counts "$or" as one key and duplicate JSON keys
//     once; a key repeated in one branch keeps its last definition.
//   - Reasons not recorded from AWS, taken from event-ruler: "Empty
//     objects are not allowed", "Match expression name not found",
//     "Value of numeric must be an array.", the anything-but list
//     messages, "Null prefix/suffix not allowed", "Invalid IP address: X",
//     the mask-bit messages, and "Filter is not an object" (a policy that
//     is JSON but not an object). "Filter policy is too large" (over 256
//     KB) is this package's wording.
//   - The text after "failed to parse JSON. " imitates Jackson's messages
//     but is not byte-exact; whitespace alone is a parse failure, not "no
//     policy"; trailing text after the policy object is refused.
//   - AWS appends Jackson's location ("\n at [Source: ...; line: 1,
//     column: N]") to the reasons met while reading; this package does
//     not (see Error).
//   - The order of the checks (see Parse), and the Subscribe form of the
//     nested-policy refusal.
//   - Body matching: a path ending at an object has no value ({"exists":
//     true} fails there); an empty String.Array counts as absent; a body
//     whose dotted or duplicate keys make the search explode stops
//     matching (see choiceBudget); nesting deeper than 1000 levels is not
//     JSON (Jackson's default limit).
package filterpolicy
