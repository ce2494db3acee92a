// Package sluicetype holds the small types shared by the broker, the wire
// front, the CLI and the consumer library: message and attribute values,
// send and receive inputs and results, and the error type that carries an
// SQS error code. It is a leaf: it imports nothing from Sluice, so every
// other package may import it without a cycle.
package sluicetype

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNoTopic: no topic has the name.
var ErrNoTopic = errors.New("sluice: no such topic")

// AttributeValue is one message attribute, as SQS models it. DataType is
// "String", "Number" or "Binary", optionally with a custom suffix such as
// "Number.float". Exactly one of the value fields is set.
type AttributeValue struct {
	DataType         string
	StringValue      *string
	BinaryValue      []byte
	StringListValues []string
	BinaryListValues [][]byte
}

// SendInput is one message to send.
type SendInput struct {
	Body string
	// DelaySeconds overrides the queue's DelaySeconds when not nil (0-900).
	DelaySeconds *int
	// Attributes are the user message attributes (at most 10).
	Attributes map[string]AttributeValue
	// TraceHeader is the AWSTraceHeader system attribute; "" when absent.
	TraceHeader string
	// TraceParent is the W3C traceparent of the send request (its HTTP
	// header), returned as the SluiceTraceParent system attribute.
	TraceParent string
	// GroupID is MessageGroupId: required on FIFO queues, the tenant key on
	// standard queues (as SQS fair queues do).
	GroupID string
	// DedupID is MessageDeduplicationId (FIFO queues only).
	DedupID string
	// SenderID is the principal that sent the message (SenderId attribute).
	SenderID string
}

// SendResult is the outcome of one successful send.
type SendResult struct {
	MessageID string
	// SequenceNumber is set on FIFO queues only.
	SequenceNumber string
	// MD5OfBody is the hex MD5 of the body (MD5OfMessageBody).
	MD5OfBody string
}

// ReceiveInput describes one receive call.
type ReceiveInput struct {
	// MaxMessages is MaxNumberOfMessages (1-10); 0 means 1.
	MaxMessages int
	// VisibilityTimeout overrides the queue's when not nil (0-43200 s).
	VisibilityTimeout *int
	// WaitTimeSeconds overrides the queue's ReceiveMessageWaitTimeSeconds when
	// not nil (0-20 s). The receive returns as soon as one message is ready.
	WaitTimeSeconds *int
	// AttemptID is ReceiveRequestAttemptId (FIFO queues only).
	AttemptID string
	// Shard binds the receive to one shard of the queue (the Shards
	// attribute); -1 or nil means any.
	Shard *int
}

// Message is one received (or peeked) message with all its system
// attributes. The wire front filters what the client asked for.
type Message struct {
	MessageID     string
	ReceiptHandle string
	Body          string
	// MD5OfBody is the hex MD5 of Body as stored at send time; "" for
	// messages stored by versions that did not keep it.
	MD5OfBody   string
	Attributes  map[string]AttributeValue
	TraceHeader string
	TraceParent string
	SenderID    string
	// SentTimestamp and FirstReceiveTimestamp have millisecond precision.
	SentTimestamp         time.Time
	FirstReceiveTimestamp time.Time
	ReceiveCount          int
	GroupID               string
	DedupID               string
	SequenceNumber        string
	// DeadLetterSourceArn is set on messages moved to a dead-letter queue.
	DeadLetterSourceArn string
	// Sluice's failure information (retry ladders, RetryMessage,
	// RejectMessage): the retry level it waits at, the last failure's
	// reason, the consumer's last error text, when it first failed and how
	// many times. Zero for messages that never failed.
	RetryLevel   int
	FailReason   string
	LastError    string
	FirstFailure time.Time
	Failures     int
}

// Code names an SQS error by its shape (the short name used in the JSON
// protocol's __type). The wire front maps it to the Query code, the HTTP
// status and the fault side through its catalogue.
type Code string

// The error codes the broker returns. The wire front owns the catalogue that
// renders them; these are only names.
const (
	CodeQueueDoesNotExist            Code = "QueueDoesNotExist"
	CodeQueueNameExists              Code = "QueueNameExists"
	CodeQueueDeletedRecently         Code = "QueueDeletedRecently"
	CodeInvalidParameterValue        Code = "InvalidParameterValue"
	CodeMissingParameter             Code = "MissingParameter"
	CodeInvalidAttributeName         Code = "InvalidAttributeName"
	CodeInvalidAttributeValue        Code = "InvalidAttributeValue"
	CodeReceiptHandleIsInvalid       Code = "ReceiptHandleIsInvalid"
	CodeMessageNotInflight           Code = "MessageNotInflight"
	CodeTooManyEntriesInBatchRequest Code = "TooManyEntriesInBatchRequest"
	CodeEmptyBatchRequest            Code = "EmptyBatchRequest"
	CodeBatchEntryIdsNotDistinct     Code = "BatchEntryIdsNotDistinct"
	CodeInvalidBatchEntryID          Code = "InvalidBatchEntryId"
	CodeBatchRequestTooLong          Code = "BatchRequestTooLong"
	CodePurgeQueueInProgress         Code = "PurgeQueueInProgress"
	CodeUnsupportedOperation         Code = "UnsupportedOperation"
	CodeOverLimit                    Code = "OverLimit"
	CodeRequestThrottled             Code = "RequestThrottled"
	CodeInvalidMessageContents       Code = "InvalidMessageContents"
	CodeInvalidIDFormat              Code = "InvalidIdFormat"
	CodeResourceNotFound             Code = "ResourceNotFoundException"
	CodeAccessDenied                 Code = "AccessDenied"
	// CodeInternal is a server-side failure (disk full, fsync failed, a bug).
	CodeInternal Code = "InternalError"
	// CodeServiceUnavailable is returned while the broker is shutting down.
	CodeServiceUnavailable Code = "ServiceUnavailable"
)

// Error is an error with an SQS code and a client-facing message. Cause,
// when set, is the internal reason (for logs), never shown to clients.
type Error struct {
	Code    Code
	Message string
	// RetryAfter is a hint for throttling errors; zero when none.
	RetryAfter time.Duration
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err if it is (or wraps) an *Error, and
// CodeInternal otherwise.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request it serves, so
// that log lines written on its behalf can name it.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id ctx carries, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

type authorizerKey struct{}

// WithAuthorizer returns ctx carrying the caller's queue authorizer: the
// broker checks every queue an action touches with it (a dead-letter
// target, a move or redrive destination), not only the one it names.
func WithAuthorizer(ctx context.Context, allow func(queue string) bool) context.Context {
	return context.WithValue(ctx, authorizerKey{}, allow)
}

// Authorized reports whether ctx's caller may use a queue. Without an
// authorizer (embedded use, the operator's admin API) every queue is.
func Authorized(ctx context.Context, queue string) bool {
	allow, _ := ctx.Value(authorizerKey{}).(func(string) bool)
	return allow == nil || allow(queue)
}
