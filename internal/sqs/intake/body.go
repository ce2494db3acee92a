package intake

import (
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/sluicemq/sluice/internal/sqs/wire"
	st "github.com/sluicemq/sluice/sluicetype"
)

// MaxRequestBytes bounds a request body. A 1 MiB message (or a batch of
// 1 MiB in total) can grow several times on the wire: percent-encoding in
// Query forms triples non-ASCII bytes, base64 adds a third to binary
// attributes, and JSON escapes control characters.
const MaxRequestBytes = 5 << 20

// ReadBody admits r's body to the budget (refusing at once one declared
// larger than MaxRequestBytes) and reads it into *buf, replacing what it
// held. The grant it returns holds the body's room until Done, also when
// the read fails; it is nil when the body was not admitted.
func (b *Budget) ReadBody(w http.ResponseWriter, r *http.Request, buf *[]byte) (*Grant, error) {
	if r.ContentLength > MaxRequestBytes {
		return nil, tooLarge()
	}
	g, err := b.admit(r.Context(), r.ContentLength)
	if err != nil {
		return nil, err
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, MaxRequestBytes), r.ContentLength, *buf, g)
	*buf = body
	if err != nil {
		var mbe *http.MaxBytesError
		var e *st.Error
		switch {
		case errors.As(err, &mbe):
			return g, tooLarge()
		case errors.As(err, &e):
			return g, e
		}
		return g, st.Errorf(wire.CodeMalformedInput, "Could not read the request body.")
	}
	return g, nil
}

func tooLarge() error {
	return st.Errorf(wire.CodeRequestTooLarge, "Request body is larger than %d bytes.", MaxRequestBytes)
}

// readBody reads r to its end into buf's storage (replacing what it held),
// sized by the declared length when there is one: the in-flight budget has
// already reserved that much (g), so a false Content-Length holds the
// sender's share of the budget, nothing more. A body of unknown length
// must win more of the budget as it grows.
func readBody(r io.Reader, declared int64, buf []byte, g *Grant) ([]byte, error) {
	buf = buf[:0]
	if declared >= 0 && declared <= MaxRequestBytes && int64(cap(buf)) < declared+1 {
		buf = make([]byte, 0, declared+1) // +1: the read that sees the end
	}
	for {
		if len(buf) == cap(buf) {
			if err := g.grow(int64(2*cap(buf) + 512)); err != nil {
				return buf, err
			}
			buf = slices.Grow(buf, cap(buf)+512)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
