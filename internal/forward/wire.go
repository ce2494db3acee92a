package forward

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// The reserved NATS headers (see the package doc).
const (
	hdrMethod  = "Sluice-Fwd-Method"
	hdrURI     = "Sluice-Fwd-Uri"
	hdrHost    = "Sluice-Fwd-Host"
	hdrRemote  = "Sluice-Fwd-Remote"
	hdrScheme  = "Sluice-Fwd-Scheme"
	hdrTimeout = "Sluice-Fwd-Timeout"
	hdrFrom    = "Sluice-Fwd-From"
	hdrStatus  = "Sluice-Fwd-Status"
	hdrPing    = "Sluice-Fwd-Ping" // on a ping (Ping): answered at once, no request served

	reservedPrefix = "Sluice-Fwd-"
	escapePrefix   = "Sluice-Fwd-Hdr-" // an HTTP header whose name is reserved
)

// ErrBadHeader is returned for a header that cannot cross NATS: its name is
// not an HTTP token.
var ErrBadHeader = errors.New("forward: header name is not a valid HTTP token")

// reserved reports whether a canonical header name belongs to NATS (the
// client library reads Status and Description, the server Nats-...) or to
// this package, so that an HTTP header of that name must travel escaped.
func reserved(name string) bool {
	return name == "Status" || name == "Description" ||
		strings.HasPrefix(name, "Nats-") || strings.HasPrefix(name, reservedPrefix)
}

// hopByHop holds the headers that belong to one connection (RFC 9110
// section 7.6.1, and the ones net/http/httputil.ReverseProxy also drops).
var hopByHop = map[string]bool{
	"Connection":          true,
	"Proxy-Connection":    true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

// dropped returns the canonical names of h's hop-by-hop headers, those
// Connection names included, leaving out the ones in keep.
func dropped(h http.Header, keep map[string]bool) map[string]bool {
	drop := map[string]bool{}
	for name := range hopByHop {
		if !keep[name] {
			drop[name] = true
		}
	}
	for _, v := range h.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if name := http.CanonicalHeaderKey(strings.TrimSpace(tok)); name != "" && !keep[name] {
				drop[name] = true
			}
		}
	}
	return drop
}

// signedHeaders returns the canonical names of the headers a SigV4
// signature on r covers (Authorization header or presigned query), nil if
// r is not signed. It only reads SignedHeaders; verifying is the owner's.
func signedHeaders(r *http.Request) map[string]bool {
	var list string
	if auth := r.Header.Get("Authorization"); auth != "" {
		rest, _ := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
		for part := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(part), "SignedHeaders="); ok {
				list = v
			}
		}
	} else if r.URL != nil {
		list = r.URL.Query().Get("X-Amz-SignedHeaders")
	}
	if list == "" {
		return nil
	}
	signed := map[string]bool{}
	for name := range strings.SplitSeq(list, ";") {
		signed[http.CanonicalHeaderKey(name)] = true
	}
	return signed
}

// validName reports whether name is an HTTP token (RFC 9110 section 5.1),
// which also makes it a valid NATS header name.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// putHeaders adds src's headers to dst, canonical and escaped, leaving out
// those in drop.
func putHeaders(dst nats.Header, src http.Header, drop map[string]bool) error {
	for k, vs := range src {
		if !validName(k) {
			return fmt.Errorf("%w: %q", ErrBadHeader, k)
		}
		name := http.CanonicalHeaderKey(k)
		if drop[name] || len(vs) == 0 {
			continue
		}
		if reserved(name) {
			name = escapePrefix + name
		}
		dst[name] = append(dst[name], vs...)
	}
	return nil
}

// getHeaders returns the HTTP headers src carries, unescaped, without the
// reserved fields or anything the NATS server added.
func getHeaders(src nats.Header) http.Header {
	h := make(http.Header, len(src))
	for k, vs := range src {
		name := http.CanonicalHeaderKey(k)
		if orig, ok := strings.CutPrefix(name, escapePrefix); ok {
			name = http.CanonicalHeaderKey(orig)
		} else if reserved(name) {
			continue
		}
		h[name] = append(h[name], vs...)
	}
	return h
}

// payloadSize is what m counts against the max payload: headers and data.
func payloadSize(m *nats.Msg) int64 {
	return int64(m.Size() - len(m.Subject) - len(m.Reply))
}

// encodeResponse builds the reply carrying a response.
func encodeResponse(status int, header http.Header, body []byte) (*nats.Msg, error) {
	m := &nats.Msg{Header: nats.Header{}, Data: body}
	m.Header.Set(hdrStatus, strconv.Itoa(status))
	if err := putHeaders(m.Header, header, dropped(header, nil)); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeResponse reads a reply.
func decodeResponse(m *nats.Msg) (*Response, error) {
	status, err := strconv.Atoi(m.Header.Get(hdrStatus))
	if err != nil || status < 100 || status > 999 {
		return nil, fmt.Errorf("%w: status %q", ErrBadReply, m.Header.Get(hdrStatus))
	}
	return &Response{Status: status, Header: getHeaders(m.Header), Body: m.Data}, nil
}
