// Package forward carries an HTTP request from the cluster node that
// received it to the node that owns the queue partition it is about, over
// NATS request/reply, and carries the response back unchanged.
//
// The forwarding node calls Do (or Client.Do) with the request and its body
// already read, on the subject of the node that owns the partition the
// request is about; that node serves its subject (a wildcard, whose last
// token is the partition) with Serve, in a queue group, and hands every
// request it receives to its ordinary http.Handler, exactly as if it had
// come directly (Subject tells the handler which subject it came on).
// Which subjects there are and who serves them is the caller's choice. The owner
// re-verifies the SigV4 signature itself, so the NATS transport needs no
// trust: what this package must guarantee is that the request arrives as the
// client sent it (method, request-target, Host, every end-to-end header,
// body), and that the response goes back as the handler wrote it.
//
// # Wire format
//
// A request is one NATS message, sent to the served subject with a reply
// inbox. Its data is the body; its NATS headers are a few reserved
// fields and the HTTP headers:
//
//	Sluice-Fwd-Method:  POST
//	Sluice-Fwd-Uri:     /123456789012/orders?Action=SendMessage   (the request-target as received)
//	Sluice-Fwd-Host:    sqs.example.com:9324
//	Sluice-Fwd-Remote:  10.0.0.7:53122    (the client's address; omitted when unknown)
//	Sluice-Fwd-Scheme:  https             (omitted for plain http)
//	Sluice-Fwd-Timeout: 20500             (milliseconds the forwarder will wait for the reply)
//	Sluice-Fwd-From:    node-2            (the forwarding node: the mark that stops a second hop)
//	Content-Type:       application/x-amz-json-1.0
//	X-Amz-Date:         20250101T000000Z
//	...                 (one NATS header line per HTTP header value)
//
// The reply's data is the response body; its headers are
//
//	Sluice-Fwd-Status: 200
//	...                (the response's HTTP headers)
//
// HTTP header names travel canonicalised (http.CanonicalHeaderKey), since
// NATS header names are case-sensitive, and are canonicalised again on
// arrival. A header whose canonical name NATS reserves (Status, Description,
// Nats-...) or this package reserves (Sluice-Fwd-...) travels as
// Sluice-Fwd-Hdr-<name> and is restored on arrival, so no header a client
// sends can steer the NATS server or client (message tracing, the
// no-responders status) or fake a reserved field. Hop-by-hop headers
// (Connection and the headers it names, Keep-Alive, Proxy-Connection,
// Proxy-Authenticate, Proxy-Authorization, Te, Trailer, Transfer-Encoding,
// Upgrade) are dropped both ways, except, in a request, those the SigV4
// signature covers. Host travels in Sluice-Fwd-Host, not as a header.
//
// NATS trims a header value's leading and trailing white space and turns CR
// and LF into spaces, as net/http's server does to request header values and
// its writer to response header values; a request received by net/http
// therefore arrives byte-identical, and its signature still verifies.
//
// The timeout is relative, not a wall-clock deadline, so that clocks on the
// two nodes need not agree; the owner's request context ends that long after
// the request arrived. Choose the forwarder's deadline with a margin over
// what the handler may take (an SQS long poll: WaitTimeSeconds plus a
// margin), as the reply must get back before it.
//
// # Pings
//
// Ping sends a message with the header Sluice-Fwd-Ping and no request
// fields to a served subject; the Server answers it 204 from its
// subscription's delivery loop, without a handler, so that a forwarding
// node can tell a node that is gone (nobody serves the subject: NATS
// answers no responders at once) from one that is slow. A Server that
// predates pings answers one 502 as a malformed request, which a caller
// takes as "not gone".
//
// # Guarantees
//
// NATS delivers a request to at most one member of the queue group, so each
// attempt runs the handler at most once. ErrNoOwner means nobody served the
// subject (the node serving it is gone): the handler did not run. A timed-out
// or cancelled attempt, or one whose reply was lost, may still have been
// executed by the owner, possibly after the forwarder gave up; Do never
// retries.
//
// # Routing
//
// A Router is the retry loop around Do that a cluster node forwards with:
// it sends a request to the node its Owners name for the request's
// partition, follows the lease bucket while the partition is between
// owners, and, told by its Watcher (the node's liveness tracker) that the
// node it waits on went silent or away, stops waiting: an idempotent
// request (How) goes to the next owner, any other ends ErrOwnerLost or
// ErrOwnerSilent, as it may or may not have taken effect.
//
// A request and a response each travel in one NATS message, so each must
// fit the connection's max payload (headers included). A request that does
// not is refused before it is sent (ErrTooLarge); a response that does not
// is replaced by a 500 response saying so, after the handler ran.
//
// The package must not interpret requests: it neither authenticates, nor
// parses bodies, nor decides who owns what (the Router asks its Owners).
package forward
