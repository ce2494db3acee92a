package wire

import st "github.com/sluicemq/sluice/sluicetype"

// Form is how one error code looks on the wire. The catalogue is data:
// both protocols render errors from it, so they always agree.
type Form struct {
	// QueryCode is the Query protocol's <Code> and the x-amzn-query-error code.
	QueryCode string
	// JSONType is the JSON protocol's __type.
	JSONType string
	Status   int
	// Sender is true for client faults, false for server faults.
	Sender bool
}

const (
	sqsNS   = "com.amazonaws.sqs#"
	coralNS = "com.amazon.coral.service#"
)

// catalog maps every code the server answers with to its wire form
// (shared/reference/sqs-compat.md section 5).
var catalog = map[st.Code]Form{
	st.CodeQueueDoesNotExist:            {"AWS.SimpleQueueService.NonExistentQueue", sqsNS + "QueueDoesNotExist", 400, true},
	st.CodeQueueNameExists:              {"QueueAlreadyExists", sqsNS + "QueueNameExists", 400, true},
	st.CodeQueueDeletedRecently:         {"AWS.SimpleQueueService.QueueDeletedRecently", sqsNS + "QueueDeletedRecently", 400, true},
	st.CodeInvalidParameterValue:        {"InvalidParameterValue", coralNS + "InvalidParameterValueException", 400, true},
	st.CodeMissingParameter:             {"MissingParameter", coralNS + "MissingRequiredParameterException", 400, true},
	st.CodeInvalidAttributeName:         {"InvalidAttributeName", sqsNS + "InvalidAttributeName", 400, true},
	st.CodeInvalidAttributeValue:        {"InvalidAttributeValue", sqsNS + "InvalidAttributeValue", 400, true},
	st.CodeReceiptHandleIsInvalid:       {"ReceiptHandleIsInvalid", sqsNS + "ReceiptHandleIsInvalid", 404, true},
	st.CodeMessageNotInflight:           {"AWS.SimpleQueueService.MessageNotInflight", sqsNS + "MessageNotInflight", 400, true},
	st.CodeTooManyEntriesInBatchRequest: {"AWS.SimpleQueueService.TooManyEntriesInBatchRequest", sqsNS + "TooManyEntriesInBatchRequest", 400, true},
	st.CodeEmptyBatchRequest:            {"AWS.SimpleQueueService.EmptyBatchRequest", sqsNS + "EmptyBatchRequest", 400, true},
	st.CodeBatchEntryIdsNotDistinct:     {"AWS.SimpleQueueService.BatchEntryIdsNotDistinct", sqsNS + "BatchEntryIdsNotDistinct", 400, true},
	st.CodeInvalidBatchEntryID:          {"AWS.SimpleQueueService.InvalidBatchEntryId", sqsNS + "InvalidBatchEntryId", 400, true},
	st.CodeBatchRequestTooLong:          {"AWS.SimpleQueueService.BatchRequestTooLong", sqsNS + "BatchRequestTooLong", 400, true},
	st.CodePurgeQueueInProgress:         {"AWS.SimpleQueueService.PurgeQueueInProgress", sqsNS + "PurgeQueueInProgress", 403, true},
	st.CodeUnsupportedOperation:         {"AWS.SimpleQueueService.UnsupportedOperation", sqsNS + "UnsupportedOperation", 400, true},
	st.CodeOverLimit:                    {"OverLimit", sqsNS + "OverLimit", 403, true},
	st.CodeRequestThrottled:             {"RequestThrottled", sqsNS + "RequestThrottled", 403, true},
	st.CodeInvalidMessageContents:       {"InvalidMessageContents", sqsNS + "InvalidMessageContents", 400, true},
	st.CodeInvalidIDFormat:              {"InvalidIdFormat", sqsNS + "InvalidIdFormat", 400, true},
	st.CodeResourceNotFound:             {"ResourceNotFoundException", sqsNS + "ResourceNotFoundException", 404, true},
	st.CodeAccessDenied:                 {"AccessDenied", coralNS + "AccessDeniedException", 403, true},
	st.CodeInternal:                     {"InternalError", coralNS + "InternalFailure", 500, false},
	st.CodeServiceUnavailable:           {"ServiceUnavailable", coralNS + "ServiceUnavailableException", 503, false},
	CodeInvalidAction:                   {"InvalidAction", coralNS + "InvalidActionException", 400, true},
	CodeMissingAction:                   {"MissingAction", coralNS + "MissingActionException", 400, true},
	CodeSignatureDoesNotMatch:           {"SignatureDoesNotMatch", coralNS + "SignatureDoesNotMatchException", 403, true},
	CodeInvalidClientTokenID:            {"InvalidClientTokenId", coralNS + "InvalidClientTokenIdException", 403, true},
	CodeMissingAuthenticationToken:      {"MissingAuthenticationToken", coralNS + "MissingAuthenticationTokenException", 403, true},
	CodeIncompleteSignature:             {"IncompleteSignature", coralNS + "IncompleteSignatureException", 400, true},
	CodeRequestExpired:                  {"RequestExpired", coralNS + "RequestExpired", 400, true},
	CodeRequestTooLarge:                 {"RequestEntityTooLarge", coralNS + "RequestEntityTooLargeException", 413, true},
	CodeMalformedInput:                  {"MalformedInput", coralNS + "SerializationException", 400, true},
}

// Codes only the wire front produces.
const (
	CodeInvalidAction              st.Code = "InvalidAction"
	CodeMissingAction              st.Code = "MissingAction"
	CodeSignatureDoesNotMatch      st.Code = "SignatureDoesNotMatch"
	CodeInvalidClientTokenID       st.Code = "InvalidClientTokenId"
	CodeMissingAuthenticationToken st.Code = "MissingAuthenticationToken"
	CodeIncompleteSignature        st.Code = "IncompleteSignature"
	CodeRequestExpired             st.Code = "RequestExpired"
	CodeRequestTooLarge            st.Code = "RequestEntityTooLarge"
	CodeMalformedInput             st.Code = "MalformedInput"
)

func Lookup(c st.Code) Form {
	if w, ok := catalog[c]; ok {
		return w
	}
	return catalog[st.CodeInternal]
}
