package filterpolicy

// ErrorCode is the SNS error code of every Error: the SNS API answers a
// refused filter policy or scope with InvalidParameter (HTTP 400, sender
// fault).
const ErrorCode = "InvalidParameter"

// Error is a filter policy or filter policy scope that SNS refuses.
// Error() is AWS's reason text alone, for example
// "Filter policy can not have more than 5 keys"; Message renders the whole
// InvalidParameter message as the SNS API returns it.
//
// AWS appends Jackson's position to the reasons found while reading the
// policy ("\n at [Source: (String)\"...\"; line: 1, column: 10]"); this
// package leaves it out, so clients that compare messages must compare the
// first line, as AWS-validated test suites do.
type Error struct {
	// Attribute is the subscription attribute AWS names before the
	// reason: "FilterPolicy" or "FilterPolicyScope". It is empty for the
	// one reason AWS renders without it, the refusal of a nested policy
	// under the MessageAttributes scope.
	Attribute string
	// Reason is AWS's reason text.
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// Operation is the SNS action a policy or scope arrived with; it decides
// how AWS words the error.
type Operation uint8

const (
	// Subscribe is the Subscribe action, whose Attributes map carries
	// FilterPolicy and FilterPolicyScope.
	Subscribe Operation = iota
	// SetSubscriptionAttributes is the SetSubscriptionAttributes action.
	SetSubscriptionAttributes
)

// Message is the InvalidParameter message SNS returns for e:
//
//	Subscribe:                 Invalid parameter: Attributes Reason: FilterPolicy: <reason>
//	SetSubscriptionAttributes: Invalid parameter: FilterPolicy: <reason>
//
// (AWS-recorded for both). The nested-policy refusal has no
// "FilterPolicy: " label (recorded for SetSubscriptionAttributes; the
// Subscribe form is inferred from the same rule).
func (e *Error) Message(op Operation) string {
	prefix := "Invalid parameter: "
	if op == Subscribe {
		prefix += "Attributes Reason: "
	}
	if e.Attribute != "" {
		prefix += e.Attribute + ": "
	}
	return prefix + e.Reason
}

// policyError is a FilterPolicy refusal.
func policyError(reason string) *Error {
	return &Error{Attribute: "FilterPolicy", Reason: reason}
}
