// Package consumer runs handlers over the messages of an SQS queue: on
// Sluice, and on Amazon SQS (where Sluice's extensions are absent, it
// falls back to what SQS offers).
//
// It receives in batches and deletes in batches; limits how many
// handlers run at once, in all and per tenant; extends the visibility of
// every message while its handler runs (a heartbeat) and cancels the
// handler's context with ErrLeaseLost when the message was delivered to
// someone else; and turns a handler's result into the message's fate:
//
//	nil                   deleted
//	Retry(err, delay)     failed, retryable: up the queue's retry ladder
//	                      (Sluice RetryMessage), after delay if given
//	Permanent(err)        failed for good: the dead-letter queue at once
//	                      (Sluice RejectMessage)
//	Defer(delay)          put off for later, not a failure (Sluice DeferMessage)
//	any other error       retryable, as Retry(err, -1)
//	a panic               recovered; retryable
//
// Usage:
//
//	c, err := consumer.New(client, queueURL, func(ctx context.Context, m *consumer.Message) error {
//		return process(ctx, m.Body)
//	}, consumer.Options{Concurrency: 32, TenantConcurrency: 4})
//	if err != nil { ... }
//	c.Start()
//	...
//	c.Shutdown(ctx) // stop receiving, let running handlers finish
package consumer
