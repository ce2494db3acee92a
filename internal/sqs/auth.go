package sqs

import (
	"errors"

	"github.com/sluicemq/sluice/internal/sigv4"
	"github.com/sluicemq/sluice/internal/sqs/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

// MaxClockSkew is how far a request's X-Amz-Date may be from the server's.
const MaxClockSkew = sigv4.MaxClockSkew

// identify checks everything about a request's signature that does not
// need its body (sigv4.Identify), when credentials are configured. It
// runs before the body is read, so an unsigned or unknown caller costs the
// server no memory. Without credentials the access key (if any) names the
// principal and any signature goes; identify then returns nil.
func (s *Server) identify(req *request) (*signature, error) {
	if s.cfg.Credentials == nil {
		if sig, err := sigv4.Parse(req.r); err == nil && sig != nil {
			req.principal = &sigv4.Principal{Name: sig.AccessKey}
		}
		return nil, nil
	}
	now := s.cfg.Now()
	sig, p, err := sigv4.Identify(req.r, s.cfg.Credentials, now)
	var inc *sigv4.Incomplete
	var skew *sigv4.SkewError
	switch {
	case err == nil:
		return &signature{Signature: sig, principal: p}, nil
	case errors.As(err, &inc):
		return nil, st.Errorf(wire.CodeIncompleteSignature, "The request signature is incomplete: %s.", inc.Why)
	case errors.Is(err, sigv4.ErrUnsigned):
		return nil, st.Errorf(wire.CodeMissingAuthenticationToken, "Request is missing Authentication Token")
	case errors.Is(err, sigv4.ErrUnknownKey), errors.Is(err, sigv4.ErrBadToken):
		return nil, st.Errorf(wire.CodeInvalidClientTokenID, "The security token included in the request is invalid.")
	case errors.Is(err, sigv4.ErrBadDate):
		return nil, st.Errorf(wire.CodeIncompleteSignature, "X-Amz-Date is not a valid ISO 8601 basic timestamp.")
	case errors.As(err, &skew):
		date := skew.Date.UTC().Format("20060102T150405Z")
		return nil, st.Errorf(wire.CodeSignatureDoesNotMatch, "Signature expired: %s is now earlier than %s (%s - 15 min.)", date, now.UTC().Add(-MaxClockSkew).Format("20060102T150405Z"), now.UTC().Format("20060102T150405Z"))
	case errors.Is(err, sigv4.ErrPresignExpired):
		return nil, st.Errorf(wire.CodeRequestExpired, "Request has expired.")
	}
	return nil, err
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
	if !sig.Verify(req.r, body, p) {
		return st.Errorf(wire.CodeSignatureDoesNotMatch, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	req.principal = p
	return nil
}
