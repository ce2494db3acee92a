package filterpolicy

// Scope is what a subscription's filter policy is applied to, its
// FilterPolicyScope attribute.
type Scope uint8

const (
	// MessageAttributes applies the policy to the message attributes. It
	// is the zero value, as it is AWS's default.
	MessageAttributes Scope = iota
	// MessageBody applies the policy to the message body, which must then
	// be a JSON object.
	MessageBody
)

// String is the attribute value that names the scope.
func (s Scope) String() string {
	if s == MessageBody {
		return "MessageBody"
	}
	return "MessageAttributes"
}

// ParseScope reads a FilterPolicyScope attribute value. Only the two
// names, spelled exactly, are accepted; anything else (the empty string
// too) is refused with AWS's message. A caller applies the
// MessageAttributes default itself when the attribute is absent.
func ParseScope(value string) (Scope, error) {
	switch value {
	case "MessageAttributes":
		return MessageAttributes, nil
	case "MessageBody":
		return MessageBody, nil
	}
	return MessageAttributes, &Error{
		Attribute: "FilterPolicyScope",
		Reason:    "Invalid value [" + value + "]. Please use either MessageBody or MessageAttributes",
	}
}
