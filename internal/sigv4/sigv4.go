// Package sigv4 verifies AWS Signature Version 4 on incoming requests
// (the Authorization header and presigned URLs) and holds the credentials
// file: access keys, their secrets and session tokens, and the queue
// patterns each principal may use. What an SQS error a failure becomes is
// the SQS front's business.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strings"
	"sync/atomic"
)

// Credentials maps access keys to principals. It is loaded from a JSON file:
//
//	{"principals": [
//	  {"name": "orders-service", "access_key_id": "AKIDORDERS", "secret_access_key": "…",
//	   "session_token": "", "queues": ["orders-*", "orders-dlq"]}
//	]}
//
// queues holds shell patterns (path.Match) of the queue names the principal
// may see and use; ["*"] allows every queue. A session_token, when set, must
// be sent as X-Amz-Security-Token.
type Credentials struct {
	byKey map[string]*Principal
}

// Principal is an authenticated caller.
type Principal struct {
	Name            string   `json:"name"`
	AccessKeyID     string   `json:"access_key_id"`
	SecretAccessKey string   `json:"secret_access_key"`
	SessionToken    string   `json:"session_token,omitempty"`
	Queues          []string `json:"queues"`

	keys signingKeys
}

// signingKeys keeps a principal's signing keys of its latest scopes (a
// day, a region, a service): the same for every request signed in one,
// and four HMACs to derive, as AWS's SigV4 guide says a verifier should
// keep them. A list read without a lock, replaced whole on a miss (two
// replacing at once lose one entry: it is derived again).
type signingKeys struct{ list atomic.Pointer[[]signingKey] }

type signingKey struct {
	scope string
	key   []byte
}

// keysKept is how many scopes a principal's keys are kept for; a scope
// longer than maxKeptScope (no real one is) is derived every time, so that
// a client cannot make a principal keep large headers.
const (
	keysKept     = 4
	maxKeptScope = 128
)

// key is the signing key of scope (date/region/service/aws4_request, as
// Parse made it) under secret.
func (k *signingKeys) key(secret, scope string) []byte {
	old := k.list.Load()
	if old != nil {
		for _, e := range *old {
			if e.scope == scope {
				return e.key
			}
		}
	}
	parts := strings.Split(scope, "/") // four: Parse checked the credential
	key := hmacSHA256([]byte("AWS4"+secret), parts[0])
	key = hmacSHA256(key, parts[1])
	key = hmacSHA256(key, parts[2])
	key = hmacSHA256(key, "aws4_request")
	if len(scope) <= maxKeptScope {
		list := []signingKey{{strings.Clone(scope), key}}
		if old != nil {
			list = append(list, (*old)[:min(len(*old), keysKept-1)]...)
		}
		k.list.Store(&list)
	}
	return key
}

// LoadCredentials reads a credentials file.
func LoadCredentials(file string) (*Credentials, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading credentials: %w", err)
	}
	return ParseCredentials(raw)
}

// ParseCredentials parses the credentials JSON.
func ParseCredentials(raw []byte) (*Credentials, error) {
	var doc struct {
		Principals []*Principal `json:"principals"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	c := &Credentials{byKey: map[string]*Principal{}}
	for i, p := range doc.Principals {
		if p.AccessKeyID == "" || p.SecretAccessKey == "" {
			return nil, fmt.Errorf("credentials file: principal %d needs access_key_id and secret_access_key", i+1)
		}
		if p.Name == "" {
			p.Name = p.AccessKeyID
		}
		for _, q := range p.Queues {
			if _, err := path.Match(q, ""); err != nil {
				return nil, fmt.Errorf("credentials file: principal %s: bad queue pattern %q", p.Name, q)
			}
		}
		if _, dup := c.byKey[p.AccessKeyID]; dup {
			return nil, fmt.Errorf("credentials file: access key %s appears twice", p.AccessKeyID)
		}
		c.byKey[p.AccessKeyID] = p
	}
	return c, nil
}

// Allows reports whether the principal may use a queue. A nil principal
// (authentication off) may use every queue.
func (p *Principal) Allows(queue string) bool {
	if p == nil || p.Queues == nil && p.SecretAccessKey == "" {
		return true
	}
	for _, pat := range p.Queues {
		if ok, _ := path.Match(pat, queue); ok {
			return true
		}
	}
	return false
}

// SenderID is the SenderId attribute of messages the principal sends.
func (p *Principal) SenderID() string {
	if p == nil {
		return ""
	}
	return p.Name
}

// Lookup returns the principal of an access key, or nil.
func (c *Credentials) Lookup(accessKey string) *Principal {
	return c.byKey[accessKey]
}

// Signature is a request's SigV4 signature as the request states it.
type Signature struct {
	AccessKey, Date, Scope, Region, Service string
	SignedHeaders                           []string
	Signature                               string
	Presigned                               bool
	Expires                                 int // seconds, presigned URLs
}

// Incomplete is the error of a signature that lacks a part.
type Incomplete struct{ Why string }

func (e *Incomplete) Error() string { return "the request signature is incomplete: " + e.Why }

// Parse reads the Authorization header or the presigned query form. It
// returns nil, nil when the request is unsigned, and an *Incomplete when a
// part is missing.
func Parse(r *http.Request) (*Signature, error) {
	incomplete := func(why string) error { return &Incomplete{Why: why} }
	s := &Signature{}
	var cred, signed string
	if auth := r.Header.Get("Authorization"); auth != "" {
		rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
		if !ok {
			return nil, incomplete("only AWS4-HMAC-SHA256 is supported")
		}
		for _, part := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "Credential":
				cred = v
			case "SignedHeaders":
				signed = v
			case "Signature":
				s.Signature = v
			}
		}
		s.Date = r.Header.Get("X-Amz-Date")
		if s.Date == "" {
			if d, err := http.ParseTime(r.Header.Get("Date")); err == nil {
				s.Date = d.UTC().Format("20060102T150405Z")
			}
		}
	} else if q := r.URL.Query(); q.Get("X-Amz-Algorithm") != "" {
		if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
			return nil, incomplete("only AWS4-HMAC-SHA256 is supported")
		}
		s.Presigned = true
		cred, signed, s.Signature, s.Date = q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature"), q.Get("X-Amz-Date")
		fmt.Sscan(q.Get("X-Amz-Expires"), &s.Expires)
	} else {
		return nil, nil
	}
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" {
		return nil, incomplete("Credential must be <key>/<date>/<region>/<service>/aws4_request")
	}
	if signed == "" || s.Signature == "" || s.Date == "" {
		return nil, incomplete("SignedHeaders, Signature and X-Amz-Date are required")
	}
	s.AccessKey, s.Region, s.Service = parts[0], parts[2], parts[3]
	s.Scope = strings.Join(parts[1:], "/")
	s.SignedHeaders = strings.Split(signed, ";")
	return s, nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// uriEncode encodes per RFC 3986 as SigV4 requires.
func uriEncode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !slash) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Compute is the signature the request should carry, signed with p's
// secret over body (or over UNSIGNED-PAYLOAD).
func (s *Signature) Compute(r *http.Request, body []byte, p *Principal, unsignedPayload bool) string {
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if unsignedPayload {
		payload = "UNSIGNED-PAYLOAD"
	}
	if payload != "UNSIGNED-PAYLOAD" {
		// The hash of the body the server received, whatever the header says.
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	}
	return s.computeOver(r, payload, p)
}

// computeOver is the signature over a payload hash (hex, or
// UNSIGNED-PAYLOAD).
func (s *Signature) computeOver(r *http.Request, payload string, p *Principal) string {
	// Canonical query: every parameter but the signature, sorted.
	q := r.URL.Query()
	q.Del("X-Amz-Signature")
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var cq []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			cq = append(cq, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	var ch strings.Builder
	for _, h := range s.SignedHeaders {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = fmt.Sprint(r.ContentLength)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		ch.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	uri := r.URL.EscapedPath()
	if uri == "" {
		uri = "/"
	}
	if u, err := url.PathUnescape(uri); err == nil {
		uri = uriEncode(u, false)
	}
	canon := strings.Join([]string{r.Method, uri, strings.Join(cq, "&"), ch.String(), strings.Join(s.SignedHeaders, ";"), payload}, "\n")
	sum := sha256.Sum256([]byte(canon))
	sts := "AWS4-HMAC-SHA256\n" + s.Date + "\n" + s.Scope + "\n" + hex.EncodeToString(sum[:])
	return hex.EncodeToString(hmacSHA256(p.keys.key(p.SecretAccessKey, s.Scope), sts))
}

// Verify reports whether the request's signature matches one computed
// with p's secret over body; a presigned URL may also be signed over
// UNSIGNED-PAYLOAD. Constant-time.
func (s *Signature) Verify(r *http.Request, body []byte, p *Principal) bool {
	ok := hmac.Equal([]byte(s.Compute(r, body, p, false)), []byte(s.Signature))
	if !ok && s.Presigned {
		ok = hmac.Equal([]byte(s.Compute(r, body, p, true)), []byte(s.Signature))
	}
	return ok
}

// ClaimedPayload is the body's hash the request states in a signed
// X-Amz-Content-Sha256 header ("" when it states none, or does not sign
// it): a server can check the signature over it before it reads the
// body, then the body against it.
func (s *Signature) ClaimedPayload(r *http.Request) string {
	h := strings.ToLower(r.Header.Get("X-Amz-Content-Sha256"))
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return ""
	}
	for _, sh := range s.SignedHeaders {
		if sh == "x-amz-content-sha256" {
			return h
		}
	}
	return ""
}

// VerifyClaimed reports whether the request's signature matches one
// computed with p's secret over its ClaimedPayload (which must not be "").
// Constant-time.
func (s *Signature) VerifyClaimed(r *http.Request, p *Principal) bool {
	return hmac.Equal([]byte(s.computeOver(r, s.ClaimedPayload(r), p)), []byte(s.Signature))
}
