package sqs

import (
	"errors"
	"time"

	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sqs/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

// MaxClockSkew is how far a request's X-Amz-Date may be from the server's.
const MaxClockSkew = 15 * time.Minute

// identify checks everything about a request's signature that does not
// need its body: that it is signed (when credentials are configured), by a
// known key, with the right session token, at a date within the allowed
// skew. It runs before the body is read, so an unsigned or unknown caller
// costs the server no memory. Without credentials the access key (if any)
// names the principal and any signature goes; identify then returns nil.
func (s *Server) identify(req *request) (*signature, error) {
	sig, err := sigv4.Parse(req.r)
	var inc *sigv4.Incomplete
	if errors.As(err, &inc) {
		err = st.Errorf(wire.CodeIncompleteSignature, "The request signature is incomplete: %s.", inc.Why)
	}
	if s.cfg.Credentials == nil {
		if err == nil && sig != nil {
			req.principal = &sigv4.Principal{Name: sig.AccessKey}
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if sig == nil {
		return nil, st.Errorf(wire.CodeMissingAuthenticationToken, "Request is missing Authentication Token")
	}
	p := s.cfg.Credentials.Lookup(sig.AccessKey)
	if p == nil {
		return nil, st.Errorf(wire.CodeInvalidClientTokenID, "The security token included in the request is invalid.")
	}
	token := req.r.Header.Get("X-Amz-Security-Token")
	if sig.Presigned {
		token = req.r.URL.Query().Get("X-Amz-Security-Token")
	}
	if p.SessionToken != "" && token != p.SessionToken {
		return nil, st.Errorf(wire.CodeInvalidClientTokenID, "The security token included in the request is invalid.")
	}
	t, err := time.Parse("20060102T150405Z", sig.Date)
	if err != nil {
		return nil, st.Errorf(wire.CodeIncompleteSignature, "X-Amz-Date is not a valid ISO 8601 basic timestamp.")
	}
	now := s.cfg.Now()
	if d := now.Sub(t); d > MaxClockSkew || d < -MaxClockSkew {
		return nil, st.Errorf(wire.CodeSignatureDoesNotMatch, "Signature expired: %s is now earlier than %s (%s - 15 min.)", sig.Date, now.UTC().Add(-MaxClockSkew).Format("20060102T150405Z"), now.UTC().Format("20060102T150405Z"))
	}
	if sig.Presigned && sig.Expires > 0 && now.After(t.Add(time.Duration(sig.Expires)*time.Second)) {
		return nil, st.Errorf(wire.CodeRequestExpired, "Request has expired.")
	}
	return &signature{Signature: sig, principal: p}, nil
}

// signature is a parsed signature and the principal of its access key.
type signature struct {
	*sigv4.Signature
	principal *sigv4.Principal
}

// verify checks the signature identify accepted against the body (the
// signature covers its hash), before the body is parsed, and only then
// lets the request act as its principal.
func (s *Server) verify(req *request, sig *signature, body []byte) error {
	if sig == nil {
		return nil
	}
	p := sig.principal
	if !sig.Verify(req.r, body, p.SecretAccessKey) {
		return st.Errorf(wire.CodeSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	req.principal = p
	return nil
}
