package broker

import (
	"crypto/rand"
	"strings"

	"github.com/sluicemq/sluice/internal/sns/signkey"
	"github.com/sluicemq/sluice/internal/vfs"
)

// newSigner is the broker's key that signs SNS envelopes (signkey): kept
// in the data directory, or in memory for a broker in memory.
func newSigner(cfg Config) *signkey.Key {
	var fs vfs.FS
	if !cfg.InMemory {
		fs = cfg.FS
		if fs == nil {
			fs = vfs.OS{}
		}
	}
	return signkey.New(fs, cfg.Dir, snsBase(cfg), rand.Reader)
}

// snsBase is where envelopes send subscribers (SigningCertURL,
// UnsubscribeURL): Config.BaseURL, or SNS's endpoint in the region.
func snsBase(cfg Config) string {
	if cfg.BaseURL != "" {
		return strings.TrimRight(cfg.BaseURL, "/")
	}
	return "https://sns." + cfg.Region + ".amazonaws.com"
}
