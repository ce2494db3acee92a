package sigv4

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// MaxClockSkew is how far a request's X-Amz-Date may be from the server's
// clock.
const MaxClockSkew = 15 * time.Minute

// Why Identify refused a request. Each front words its own answer.
var (
	// ErrUnsigned: the request carries no signature.
	ErrUnsigned = errors.New("sigv4: the request is not signed")
	// ErrUnknownKey: no principal has the request's access key.
	ErrUnknownKey = errors.New("sigv4: unknown access key")
	// ErrBadToken: the principal has a session token, and the request
	// does not carry it.
	ErrBadToken = errors.New("sigv4: wrong session token")
	// ErrBadDate: X-Amz-Date is not an ISO 8601 basic timestamp.
	ErrBadDate = errors.New("sigv4: X-Amz-Date is not an ISO 8601 basic timestamp")
	// ErrSkewed: the request's date is more than MaxClockSkew from now (a
	// *SkewError says by how much).
	ErrSkewed = errors.New("sigv4: the request's date is too far from the server's clock")
	// ErrPresignExpired: a presigned URL past its X-Amz-Expires.
	ErrPresignExpired = errors.New("sigv4: the presigned request has expired")
)

// SkewError is a request dated more than MaxClockSkew from Now.
type SkewError struct{ Date, Now time.Time }

func (e *SkewError) Error() string {
	return fmt.Sprintf("sigv4: the request is dated %s, the server's clock says %s", e.Date.Format(time.RFC3339), e.Now.Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrSkewed) hold.
func (e *SkewError) Unwrap() error { return ErrSkewed }

// Identify checks everything about r's signature that does not need its
// body: that it is signed, by a known access key, with that key's session
// token if it has one, at a date within MaxClockSkew of now (and, for a
// presigned URL, not past its expiry). It runs before the body is read,
// so an unsigned or unknown caller costs a server no memory; Verify over
// the body comes after. The error is an *Incomplete or wraps one of the
// Err values above.
func Identify(r *http.Request, c *Credentials, now time.Time) (*Signature, *Principal, error) {
	sig, err := Parse(r)
	if err != nil {
		return nil, nil, err
	}
	if sig == nil {
		return nil, nil, ErrUnsigned
	}
	p := c.Lookup(sig.AccessKey)
	if p == nil {
		return nil, nil, ErrUnknownKey
	}
	token := r.Header.Get("X-Amz-Security-Token")
	if sig.Presigned {
		token = r.URL.Query().Get("X-Amz-Security-Token")
	}
	if p.SessionToken != "" && token != p.SessionToken {
		return nil, nil, ErrBadToken
	}
	t, err := time.Parse("20060102T150405Z", sig.Date)
	if err != nil {
		return nil, nil, ErrBadDate
	}
	if d := now.Sub(t); d > MaxClockSkew || d < -MaxClockSkew {
		return nil, nil, &SkewError{Date: t, Now: now}
	}
	if sig.Presigned && sig.Expires > 0 && now.After(t.Add(time.Duration(sig.Expires)*time.Second)) {
		return nil, nil, ErrPresignExpired
	}
	return sig, p, nil
}
