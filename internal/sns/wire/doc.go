// Package wire is the SNS Query protocol (API version 2010-03-31), apart
// from what a request does: it decodes and checks requests, renders
// answers and errors as XML, and builds the message a topic delivers to a
// subscribed SQS queue. It holds no state and does no I/O beyond writing
// an answer to an http.ResponseWriter; the SNS server owns topics and
// subscriptions, looks things up, and calls in here at each step.
//
// # Requests
//
// Decode reads the parsed form of a request into one typed input per
// action (CreateTopicInput, PublishInput, ...), refusing what the model's
// request validation refuses: a missing required member is a
// ValidationError naming its path ("Value null at 'topicArn' failed to
// satisfy constraint: Member must not be null"). Each input then has a
// Validate for the service's own rules that need no stored state, with
// AWS's codes and messages word for word: topic names and attributes,
// subscription protocols, endpoints and attributes, the Publish checks in
// AWS's order, the PublishBatch whole-request errors. What needs the
// topic (FIFO or not, ContentBasedDeduplication, MaximumMessageSize) is
// passed in as TopicSettings. Scope checks ARNs against the server's
// region and account.
//
// A serving sequence, for Publish:
//
//	in, err := wire.DecodePublish(form)
//	arn, err := in.Target()
//	name, err := scope.ParseTopicARN("TopicArn", arn)
//	// look the topic up: wire.TopicNotFound() if absent
//	err = in.Validate(wire.ParseTopicSettings(topic.Attributes))
//	// publish, then
//	wire.WriteResponse(w, wire.PublishOutput{MessageID: id}, requestID)
//
// and on any error, wire.WriteError(w, err, requestID).
//
// # Answers
//
// Every action has an output type; RenderResponse writes
// <{Op}Response><{Op}Result>…</{Op}Result><ResponseMetadata>…, with the
// Result wrapper the SDKs require, <member> lists, <entry><key/><value/>
// maps, and empty lists as empty elements. Errors are *Error values whose
// Code maps to an HTTP status and a Sender or Receiver fault through one
// catalogue (errors.go); RenderError writes
// <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/>.
//
// # Delivery
//
// Deliverer.SQSMessage builds what lands in a subscribed queue for a
// Notification: the JSON envelope, pretty-printed byte for byte as AWS
// writes it and signed for standard topics through a Signer (RSASigner:
// SignatureVersion 1 is SHA1withRSA, 2 SHA256withRSA); or, with raw
// delivery, the message itself with its attributes as SQS attributes. It
// also carries the group and deduplication ids from FIFO topics to FIFO
// queues, and a standard topic's group id to standard queues.
//
// The package does not parse filter policies (package filterpolicy does:
// FilterPolicy is an opaque string here) and must not depend on the
// engine or the broker.
package wire
