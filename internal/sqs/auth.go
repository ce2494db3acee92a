package sqs

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
	"time"

	st "github.com/sluicemq/sluice/sluicetype"
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
}

// LoadCredentials reads a credentials file.
func LoadCredentials(file string) (*Credentials, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sqs: reading credentials: %w", err)
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
		return nil, fmt.Errorf("sqs: credentials file: %w", err)
	}
	c := &Credentials{byKey: map[string]*Principal{}}
	for i, p := range doc.Principals {
		if p.AccessKeyID == "" || p.SecretAccessKey == "" {
			return nil, fmt.Errorf("sqs: credentials file: principal %d needs access_key_id and secret_access_key", i+1)
		}
		if p.Name == "" {
			p.Name = p.AccessKeyID
		}
		for _, q := range p.Queues {
			if _, err := path.Match(q, ""); err != nil {
				return nil, fmt.Errorf("sqs: credentials file: principal %s: bad queue pattern %q", p.Name, q)
			}
		}
		if _, dup := c.byKey[p.AccessKeyID]; dup {
			return nil, fmt.Errorf("sqs: credentials file: access key %s appears twice", p.AccessKeyID)
		}
		c.byKey[p.AccessKeyID] = p
	}
	return c, nil
}

// allows reports whether the principal may use a queue. A nil principal
// (authentication off) may use every queue.
func (p *Principal) allows(queue string) bool {
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

// senderID is the SenderId attribute of messages the principal sends.
func (p *Principal) senderID() string {
	if p == nil {
		return ""
	}
	return p.Name
}

// MaxClockSkew is how far a request's X-Amz-Date may be from the server's.
const MaxClockSkew = 15 * time.Minute

// identify checks everything about a request's signature that does not
// need its body: that it is signed (when credentials are configured), by a
// known key, with the right session token, at a date within the allowed
// skew. It runs before the body is read, so an unsigned or unknown caller
// costs the server no memory. Without credentials the access key (if any)
// names the principal and any signature goes; identify then returns nil.
func (s *Server) identify(req *request) (*sigV4, error) {
	sig, err := parseSigV4(req.r)
	if s.cfg.Credentials == nil {
		if err == nil && sig != nil {
			req.principal = &Principal{Name: sig.accessKey}
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if sig == nil {
		return nil, st.Errorf(codeMissingAuthenticationToken, "Request is missing Authentication Token")
	}
	p := s.cfg.Credentials.byKey[sig.accessKey]
	if p == nil {
		return nil, st.Errorf(codeInvalidClientTokenID, "The security token included in the request is invalid.")
	}
	token := req.r.Header.Get("X-Amz-Security-Token")
	if sig.presigned {
		token = req.r.URL.Query().Get("X-Amz-Security-Token")
	}
	if p.SessionToken != "" && token != p.SessionToken {
		return nil, st.Errorf(codeInvalidClientTokenID, "The security token included in the request is invalid.")
	}
	t, err := time.Parse("20060102T150405Z", sig.date)
	if err != nil {
		return nil, st.Errorf(codeIncompleteSignature, "X-Amz-Date is not a valid ISO 8601 basic timestamp.")
	}
	now := s.cfg.Now()
	if d := now.Sub(t); d > MaxClockSkew || d < -MaxClockSkew {
		return nil, st.Errorf(codeSignatureDoesNotMatch, "Signature expired: %s is now earlier than %s (%s - 15 min.)", sig.date, now.UTC().Add(-MaxClockSkew).Format("20060102T150405Z"), now.UTC().Format("20060102T150405Z"))
	}
	if sig.presigned && sig.expires > 0 && now.After(t.Add(time.Duration(sig.expires)*time.Second)) {
		return nil, st.Errorf(codeRequestExpired, "Request has expired.")
	}
	sig.principal = p
	return sig, nil
}

// verify checks the signature identify accepted against the body (the
// signature covers its hash), before the body is parsed, and only then
// lets the request act as its principal.
func (s *Server) verify(req *request, sig *sigV4, body []byte) error {
	if sig == nil {
		return nil
	}
	p := sig.principal
	ok := hmac.Equal([]byte(sig.compute(req.r, body, p.SecretAccessKey, false)), []byte(sig.signature))
	if !ok && sig.presigned {
		// Presigned URLs may also be signed over UNSIGNED-PAYLOAD.
		ok = hmac.Equal([]byte(sig.compute(req.r, body, p.SecretAccessKey, true)), []byte(sig.signature))
	}
	if !ok {
		return st.Errorf(codeSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	req.principal = p
	return nil
}

type sigV4 struct {
	accessKey, date, scope, region, service string
	signedHeaders                           []string
	signature                               string
	presigned                               bool
	expires                                 int
	principal                               *Principal // set by identify
}

// parseSigV4 reads the Authorization header or the presigned query form.
// It returns nil, nil when the request is unsigned.
func parseSigV4(r *http.Request) (*sigV4, error) {
	incomplete := func(why string) error {
		return st.Errorf(codeIncompleteSignature, "The request signature is incomplete: %s.", why)
	}
	s := &sigV4{}
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
				s.signature = v
			}
		}
		s.date = r.Header.Get("X-Amz-Date")
		if s.date == "" {
			if d, err := http.ParseTime(r.Header.Get("Date")); err == nil {
				s.date = d.UTC().Format("20060102T150405Z")
			}
		}
	} else if q := r.URL.Query(); q.Get("X-Amz-Algorithm") != "" {
		if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
			return nil, incomplete("only AWS4-HMAC-SHA256 is supported")
		}
		s.presigned = true
		cred, signed, s.signature, s.date = q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature"), q.Get("X-Amz-Date")
		fmt.Sscan(q.Get("X-Amz-Expires"), &s.expires)
	} else {
		return nil, nil
	}
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" {
		return nil, incomplete("Credential must be <key>/<date>/<region>/<service>/aws4_request")
	}
	if signed == "" || s.signature == "" || s.date == "" {
		return nil, incomplete("SignedHeaders, Signature and X-Amz-Date are required")
	}
	s.accessKey, s.region, s.service = parts[0], parts[2], parts[3]
	s.scope = strings.Join(parts[1:], "/")
	s.signedHeaders = strings.Split(signed, ";")
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

func (s *sigV4) compute(r *http.Request, body []byte, secret string, unsignedPayload bool) string {
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
	for _, h := range s.signedHeaders {
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
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if unsignedPayload {
		payload = "UNSIGNED-PAYLOAD"
	}
	if payload != "UNSIGNED-PAYLOAD" {
		// The hash of the body the server received, whatever the header says.
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	}
	uri := r.URL.EscapedPath()
	if uri == "" {
		uri = "/"
	}
	if u, err := url.PathUnescape(uri); err == nil {
		uri = uriEncode(u, false)
	}
	canon := strings.Join([]string{r.Method, uri, strings.Join(cq, "&"), ch.String(), strings.Join(s.signedHeaders, ";"), payload}, "\n")
	sum := sha256.Sum256([]byte(canon))
	sts := "AWS4-HMAC-SHA256\n" + s.date + "\n" + s.scope + "\n" + hex.EncodeToString(sum[:])
	parts := strings.Split(s.scope, "/")
	k := hmacSHA256([]byte("AWS4"+secret), parts[0])
	k = hmacSHA256(k, parts[1])
	k = hmacSHA256(k, parts[2])
	k = hmacSHA256(k, "aws4_request")
	return hex.EncodeToString(hmacSHA256(k, sts))
}
