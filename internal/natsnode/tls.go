package natsnode

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// routeTLSTimeout bounds a route's TLS handshake (nats-server's default is
// 2 s): generous, so that a loaded machine does not drop routes; a peer
// that stalls costs a connection that long.
const routeTLSTimeout = 5 * time.Second

// routeTLSConfig reads and checks the route TLS files of cfg (see
// Config.ClusterTLSCert), and returns the tls.Config of the routes, and
// this node's certificate. Its errors wrap ErrConfig and name the file
// and what is wrong with it; they never quote a key.
func routeTLSConfig(cfg Config, now time.Time) (*tls.Config, *x509.Certificate, error) {
	certPEM, err := os.ReadFile(cfg.ClusterTLSCert)
	if err != nil {
		return nil, nil, configErr("cluster TLS certificate: %v", err)
	}
	keyPEM, err := os.ReadFile(cfg.ClusterTLSKey)
	if err != nil {
		return nil, nil, configErr("cluster TLS key: %v", err)
	}
	caPEM, err := os.ReadFile(cfg.ClusterTLSCA)
	if err != nil {
		return nil, nil, configErr("cluster TLS CA bundle: %v", err)
	}
	chain, err := pemCertificates(certPEM, false)
	if err != nil {
		return nil, nil, configErr("cluster TLS certificate %s: %v", cfg.ClusterTLSCert, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's errors say what it found ("tls: private key does
		// not match public key"), never the key's bytes.
		return nil, nil, configErr("cluster TLS key %s does not go with certificate %s: %v", cfg.ClusterTLSKey, cfg.ClusterTLSCert, err)
	}
	cas, err := pemCertificates(caPEM, true)
	if err != nil {
		return nil, nil, configErr("cluster TLS CA bundle %s: %v", cfg.ClusterTLSCA, err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	// A certificate that the bundle does not verify is refused by every
	// peer that uses the same bundle: say so now, and why, rather than in
	// every handshake.
	leaf := chain[0]
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: intermediates, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{usage}})
		if err != nil {
			return nil, nil, configErr("cluster TLS certificate %s (%s) does not verify against CA bundle %s: %s",
				cfg.ClusterTLSCert, leaf.Subject, cfg.ClusterTLSCA, verifyProblem(err, leaf))
		}
	}
	pair.Leaf = leaf
	tc := &tls.Config{
		// Every peer is a Sluice node, built with a Go that speaks 1.3.
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		// The route listener's side: a peer must present a certificate
		// that the bundle verifies. nats-server's route TLS (cluster.tls
		// in its configuration file) does the same.
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  pool,
		// The dialling side: the peer's certificate must verify and name
		// the host dialled (nats-server sets ServerName per route).
		RootCAs: pool,
	}
	return tc, leaf, nil
}

// pemCertificates parses the certificates of a PEM file. A CA bundle
// (ca) may hold nothing else; a certificate file may also hold its key.
func pemCertificates(data []byte, ca bool) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for i := 1; ; i++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		switch {
		case block.Type == "CERTIFICATE":
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("PEM block %d is not a valid certificate: %v", i, err)
			}
			certs = append(certs, c)
		case ca && strings.Contains(block.Type, "PRIVATE KEY"):
			return nil, fmt.Errorf("PEM block %d is a private key (%s); the bundle holds only the CA's certificates, and the CA's key belongs on no node", i, block.Type)
		case ca:
			return nil, fmt.Errorf("PEM block %d is a %s, not a CERTIFICATE", i, block.Type)
		}
	}
	if len(certs) == 0 {
		return nil, errors.New("holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")")
	}
	return certs, nil
}

// verifyProblem says in words why a certificate does not verify.
func verifyProblem(err error, leaf *x509.Certificate) string {
	var invalid x509.CertificateInvalidError
	if errors.As(err, &invalid) {
		switch invalid.Reason {
		case x509.Expired:
			return fmt.Sprintf("a certificate of the chain has expired or is not valid yet (this one is valid from %s to %s): %v",
				leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), err)
		case x509.IncompatibleUsage:
			return fmt.Sprintf("its extended key usage must allow both TLS servers and clients (serverAuth and clientAuth), since a node is both on its routes: %v", err)
		}
	}
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return fmt.Sprintf("it is not signed by a CA of the bundle (its issuer: %s): %v", leaf.Issuer, err)
	}
	return err.Error()
}

// checkRouteTLSHost says, if it can tell, that the host peers dial this
// node at is not among the names of its certificate: they would refuse
// it. "" if the certificate names it, or the host is not known (an
// unspecified listen address).
func checkRouteTLSHost(cfg Config, leaf *x509.Certificate) string {
	addr := cfg.ClusterAddr
	if cfg.ClusterAdvertise != "" {
		addr = cfg.ClusterAdvertise
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return ""
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Sprintf("the cluster TLS certificate does not name this node's route host %s: peers that dial it there refuse it (%v)", host, err)
	}
	return ""
}
