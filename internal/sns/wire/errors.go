package wire

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	st "github.com/sluicemq/sluice/sluicetype"
)

// Code is an SNS error code: the <Code> of an error response, which the
// SDKs match on (aws-sdk-go-v2 with strings.EqualFold).
type Code string

// The codes of the SNS model (error.code of each exception shape), then
// the Query protocol's common ones.
const (
	CodeInvalidParameter Code = "InvalidParameter"
	// CodeParameterValueInvalid is InvalidParameterValueException: the
	// model's code is not "InvalidParameterValue".
	CodeParameterValueInvalid     Code = "ParameterValueInvalid"
	CodeNotFound                  Code = "NotFound"
	CodeResourceNotFound          Code = "ResourceNotFound"
	CodeAuthorizationError        Code = "AuthorizationError"
	CodeThrottled                 Code = "Throttled"
	CodeInternalError             Code = "InternalError"
	CodeTopicLimitExceeded        Code = "TopicLimitExceeded"
	CodeSubscriptionLimitExceeded Code = "SubscriptionLimitExceeded"
	CodeFilterPolicyLimitExceeded Code = "FilterPolicyLimitExceeded"
	CodeReplayLimitExceeded       Code = "ReplayLimitExceeded"
	CodeInvalidSecurity           Code = "InvalidSecurity"
	CodeKMSOptInRequired          Code = "KMSOptInRequired"
	CodeTagLimitExceeded          Code = "TagLimitExceeded"
	CodeStaleTag                  Code = "StaleTag"
	CodeTagPolicy                 Code = "TagPolicy"
	CodeConcurrentAccess          Code = "ConcurrentAccess"
	CodeInvalidState              Code = "InvalidState"
	CodeValidationException       Code = "ValidationException"
	CodeKMSDisabled               Code = "KMSDisabled"
	CodeKMSInvalidState           Code = "KMSInvalidState"
	CodeKMSNotFound               Code = "KMSNotFound"
	CodeKMSAccessDenied           Code = "KMSAccessDenied"
	CodeKMSThrottling             Code = "KMSThrottling"
	CodeEndpointDisabled          Code = "EndpointDisabled"

	CodeTooManyEntriesInBatchRequest Code = "TooManyEntriesInBatchRequest"
	CodeBatchEntryIdsNotDistinct     Code = "BatchEntryIdsNotDistinct"
	CodeBatchRequestTooLong          Code = "BatchRequestTooLong"
	CodeEmptyBatchRequest            Code = "EmptyBatchRequest"
	CodeInvalidBatchEntryID          Code = "InvalidBatchEntryId"

	// CodeValidationError is the request-validation layer's code: a
	// required member that is missing, a value outside the model's length
	// bounds.
	CodeValidationError Code = "ValidationError"

	CodeInvalidAction              Code = "InvalidAction"
	CodeMissingAction              Code = "MissingAction"
	CodeMissingParameter           Code = "MissingParameter"
	CodeInvalidParameterValue      Code = "InvalidParameterValue"
	CodeMalformedQueryString       Code = "MalformedQueryString"
	CodeInternalFailure            Code = "InternalFailure"
	CodeServiceUnavailable         Code = "ServiceUnavailable"
	CodeSignatureDoesNotMatch      Code = "SignatureDoesNotMatch"
	CodeInvalidClientTokenID       Code = "InvalidClientTokenId"
	CodeMissingAuthenticationToken Code = "MissingAuthenticationToken"
	CodeIncompleteSignature        Code = "IncompleteSignature"
	CodeRequestExpired             Code = "RequestExpired"
	CodeRequestEntityTooLarge      Code = "RequestEntityTooLarge"
)

// form is how one code looks on the wire.
type form struct {
	status int
	sender bool // the <Type>: Sender (client fault) or Receiver
}

// catalog is every code this package renders, with its HTTP status and
// fault side (shared/reference/sns-compat.md section 1.3). It is data, so
// the statuses can be read in one place.
var catalog = map[Code]form{
	CodeInvalidParameter:          {400, true},
	CodeParameterValueInvalid:     {400, true},
	CodeNotFound:                  {404, true},
	CodeResourceNotFound:          {404, true},
	CodeAuthorizationError:        {403, true},
	CodeThrottled:                 {429, true},
	CodeInternalError:             {500, false},
	CodeTopicLimitExceeded:        {403, true},
	CodeSubscriptionLimitExceeded: {403, true},
	CodeFilterPolicyLimitExceeded: {403, true},
	CodeReplayLimitExceeded:       {403, true},
	CodeInvalidSecurity:           {403, true},
	CodeKMSOptInRequired:          {403, true},
	CodeTagLimitExceeded:          {400, true},
	CodeStaleTag:                  {400, true},
	CodeTagPolicy:                 {400, true},
	CodeConcurrentAccess:          {400, true},
	CodeInvalidState:              {400, true},
	CodeValidationException:       {400, true},
	CodeKMSDisabled:               {400, true},
	CodeKMSInvalidState:           {400, true},
	CodeKMSNotFound:               {400, true},
	CodeKMSAccessDenied:           {400, true},
	CodeKMSThrottling:             {400, true},
	CodeEndpointDisabled:          {400, true},

	CodeTooManyEntriesInBatchRequest: {400, true},
	CodeBatchEntryIdsNotDistinct:     {400, true},
	CodeBatchRequestTooLong:          {400, true},
	CodeEmptyBatchRequest:            {400, true},
	CodeInvalidBatchEntryID:          {400, true},

	CodeValidationError: {400, true},

	CodeInvalidAction:              {400, true},
	CodeMissingAction:              {400, true},
	CodeMissingParameter:           {400, true},
	CodeInvalidParameterValue:      {400, true},
	CodeMalformedQueryString:       {404, true},
	CodeInternalFailure:            {500, false},
	CodeServiceUnavailable:         {503, false},
	CodeSignatureDoesNotMatch:      {403, true},
	CodeInvalidClientTokenID:       {403, true},
	CodeMissingAuthenticationToken: {403, true},
	CodeIncompleteSignature:        {400, true},
	CodeRequestExpired:             {400, true},
	CodeRequestEntityTooLarge:      {413, true},
}

// internalMessage is what a client sees of a failure that is not its own.
const internalMessage = "Internal Error"

// Error is an SNS error: a code and the client-facing message. Cause,
// when set, is the internal reason, for logs; clients never see it.
type Error struct {
	Code    Code
	Message string
	Cause   error
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidParameter is the InvalidParameter error with message msg, the
// error of nearly every refused request ("Invalid parameter: ...").
func InvalidParameter(msg string) *Error {
	return &Error{Code: CodeInvalidParameter, Message: msg}
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("sns: %s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return "sns: " + string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Status is the HTTP status the error is answered with; 500 for a code
// outside the catalogue.
func (e *Error) Status() int {
	if f, ok := catalog[e.Code]; ok {
		return f.status
	}
	return http.StatusInternalServerError
}

// Type is the error's <Type>: "Sender" for a client fault, "Receiver"
// for the server's own.
func (e *Error) Type() string {
	if f, ok := catalog[e.Code]; ok && f.sender {
		return "Sender"
	}
	return "Receiver"
}

// CodeOf is the code of err if it is (or wraps) an *Error, and
// CodeInternalError otherwise.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternalError
}

// The messages of errors found against stored state (the server's, not
// this package's), worded as AWS words them, so every caller words them
// alike.

// TopicNotFound is the error for a topic that does not exist (404).
func TopicNotFound() *Error { return &Error{Code: CodeNotFound, Message: "Topic does not exist"} }

// SubscriptionNotFound is the error for a subscription that does not
// exist (404).
func SubscriptionNotFound() *Error {
	return &Error{Code: CodeNotFound, Message: "Subscription does not exist"}
}

// ResourceNotFound is the tagging actions' error for a resource that does
// not exist (404).
func ResourceNotFound() *Error {
	return &Error{Code: CodeResourceNotFound, Message: "Resource does not exist"}
}

// TopicExistsWithDifferentAttributes is CreateTopic's error for a name
// taken by a topic with other attributes.
func TopicExistsWithDifferentAttributes() *Error {
	return InvalidParameter("Invalid parameter: Attributes Reason: Topic already exists with different attributes")
}

// TopicExistsWithDifferentTags is CreateTopic's error for a name taken by
// a topic with other tags (more tags, or other values).
func TopicExistsWithDifferentTags() *Error {
	return InvalidParameter("Invalid parameter: Tags Reason: Topic already exists with different tags")
}

// SubscriptionExistsWithDifferentAttributes is Subscribe's error for an
// endpoint already subscribed to the topic with other attributes.
func SubscriptionExistsWithDifferentAttributes() *Error {
	return InvalidParameter("Invalid parameter: Attributes Reason: Subscription already exists with different attributes")
}

// InternalError is the error for a failure of the server's own; cause is
// for the log.
func InternalError(cause error) *Error {
	return &Error{Code: CodeInternalError, Message: internalMessage, Cause: cause}
}

// fromSluice maps the broker's and the shared front's error codes
// (authentication, body limits, shutdown) onto SNS codes. Codes spelled
// the same in both protocols keep their message.
var fromSluice = map[st.Code]Code{
	st.CodeAccessDenied:          CodeAuthorizationError,
	st.CodeRequestThrottled:      CodeThrottled,
	st.CodeServiceUnavailable:    CodeServiceUnavailable,
	st.CodeInvalidParameterValue: CodeInvalidParameterValue,
	st.CodeMissingParameter:      CodeMissingParameter,
	"MalformedInput":             CodeMalformedQueryString,
}

// asError is err as an SNS *Error: itself, a sluicetype error mapped onto
// its SNS code, or an internal error.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if _, ok := catalog[e.Code]; ok {
			return e
		}
		return InternalError(err)
	}
	var se *st.Error
	if errors.As(err, &se) {
		code, ok := fromSluice[se.Code]
		if !ok {
			code = Code(se.Code)
		}
		if _, known := catalog[code]; known && code != CodeInternalError && code != CodeInternalFailure {
			return &Error{Code: code, Message: se.Message, Cause: se.Cause}
		}
	}
	return InternalError(err)
}

// RenderError is the HTTP status and XML body of the answer to err, which
// need not be an *Error: anything else answers as an internal error
// without its text.
//
//	<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type>
//	<Code>NotFound</Code><Message>Topic does not exist</Message></Error><RequestId>…</RequestId></ErrorResponse>
func RenderError(err error, requestID string) (status int, body []byte) {
	e := asError(err)
	var b bytes.Buffer
	b.WriteString(`<ErrorResponse xmlns="` + Namespace + `"><Error>`)
	element(&b, "Type", e.Type())
	element(&b, "Code", string(e.Code))
	element(&b, "Message", e.Message)
	b.WriteString("</Error>")
	element(&b, "RequestId", requestID)
	b.WriteString("</ErrorResponse>")
	return e.Status(), b.Bytes()
}

// WriteError answers the request with err (see RenderError).
func WriteError(w http.ResponseWriter, err error, requestID string) {
	status, body := RenderError(err, requestID)
	writeXML(w, status, body, requestID)
}

func writeXML(w http.ResponseWriter, status int, body []byte, requestID string) {
	h := w.Header()
	h.Set("Content-Type", "text/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if requestID != "" {
		h.Set("x-amzn-RequestId", requestID)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
