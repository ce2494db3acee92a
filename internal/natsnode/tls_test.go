package natsnode_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicemq/sluice/internal/natsnode"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
	dir  string
}

// newCA makes a CA named name and writes its certificate to dir.
func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, name+"-ca.pem"), dir: dir}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue makes a node certificate named name, for the IP address 127.0.0.1
// and the DNS name localhost, for TLS servers and clients, and writes it
// and its key to the CA's dir; modify, if not nil, changes the template
// first. It returns the paths of the certificate and the key.
func (ca *testCA) issue(t *testing.T, name string, modify func(*x509.Certificate)) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	if modify != nil {
		modify(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withTLS sets cfg's route TLS files to a certificate named after its
// node, issued by ca.
func (ca *testCA) withTLS(t *testing.T, cfg natsnode.Config) natsnode.Config {
	t.Helper()
	cfg.ClusterTLSCert, cfg.ClusterTLSKey = ca.issue(t, cfg.Node+"-"+ca.cert.Subject.CommonName, nil)
	cfg.ClusterTLSCA = ca.file
	return cfg
}

// TestRouteTLS runs three nodes whose routes use TLS (and a cluster
// secret), n1 and n3 listing only n2 and themselves so that their route
// to each other is dialled on gossip: they form a cluster that stores an
// R3 stream. The route listener speaks only TLS, and only to a client with
// a certificate of the CA.
func TestRouteTLS(t *testing.T) {
	t.Parallel()
	ca := newCA(t, t.TempDir(), "sluice")
	secret := "secret-" + rand.Text()
	var logs [3]logBuffer
	cfgs := []natsnode.Config{
		{Node: "n1", ClusterAddr: "0", Peers: []string{"0", "1"}},
		{Node: "n2", ClusterAddr: "1", Peers: []string{"0", "1", "2"}},
		{Node: "n3", ClusterAddr: "2", Peers: []string{"1", "2"}},
	}
	for i := range cfgs {
		cfgs[i] = ca.withTLS(t, cfgs[i])
		cfgs[i].Cluster, cfgs[i].ClusterSecret, cfgs[i].Logger = "tls", secret, logs[i].logger(slog.LevelDebug)
	}
	nodes := startNodes(t, 3, cfgs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	mustReady(ctx, t, nodes)
	eventually(t, "every node routed to both others", func() error {
		for _, n := range nodes {
			if p := n.Peers(); len(p) != 2 {
				return fmt.Errorf("%s's peers: %+v", n.Name(), p)
			}
		}
		return nil
	})
	for i := range nodes {
		log := logs[i].String()
		if want := "routes_authenticated=true routes_tls=true"; !strings.Contains(log, `msg="NATS node started"`) || !strings.Contains(log, want) {
			t.Errorf("n%d's start line lacks %s", i+1, want)
		}
		// nats-server's debug line for each route's completed handshake.
		if want := "TLS version 1.3, cipher suite"; !strings.Contains(log, want) {
			t.Errorf("n%d's log lacks %q", i+1, want)
		}
		if strings.Contains(log, "route TLS handshake failed") || strings.Contains(log, "level=ERROR") {
			t.Errorf("n%d logged a failed handshake, or an error:\n%s", i+1, log)
		}
		if vz, err := nodes[i].Server().Varz(nil); err != nil || !vz.Cluster.TLSRequired || !vz.Cluster.TLSVerify {
			t.Errorf("n%d's varz: cluster %+v, %v; want TLS required and verified", i+1, vz.Cluster, err)
		}
	}

	// An R3 stream, written through n3.
	js := jetStream(t, nodes[2])
	eventually(t, "create an R3 stream", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "wal", Subjects: []string{"wal.>"},
			Replicas: 3, Storage: jetstream.FileStorage})
		return err // 10005 (no suitable peers) for a moment after Ready
	})
	var last uint64
	for i := range 5 {
		last = appendFenced(t, js, "wal.p0", fmt.Sprint("m", i), last)
	}
	info, err := js.Stream(ctx, "wal")
	if err != nil {
		t.Fatal(err)
	}
	if ci := info.CachedInfo(); ci.State.Msgs != 5 || len(ci.Cluster.Replicas) != 2 {
		t.Errorf("stream: %d msgs, %d replicas besides the leader; want 5, 2", ci.State.Msgs, len(ci.Cluster.Replicas))
	}

	// The route listener answers a plain TCP client with nothing: no INFO
	// (without TLS it sends one at once), the connection closed.
	n2Addr := nodes[1].Config().ClusterAddr
	plain, err := net.DialTimeout("tcp", n2Addr, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := io.WriteString(plain, "CONNECT {}\r\nPING\r\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(plain); len(got) != 0 || err != nil {
		t.Errorf("a plain TCP client read %q, %v; want nothing, and EOF", got, err)
	}
	eventually(t, "n2 logs the plain client", func() error {
		if want := "reason=\"the peer does not use TLS on its routes"; !strings.Contains(logs[1].String(), want) {
			return errors.New("n2's log lacks " + want)
		}
		return nil
	})

	// A TLS client with a certificate of the CA gets the route INFO.
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	certFile, keyFile := ca.issue(t, "probe", nil)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: waitTimeout},
		Config: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1"}}
	conn, err := dialer.DialContext(ctx, "tcp", n2Addr)
	if err != nil {
		t.Fatalf("TLS dial with a certificate of the CA: %v", err)
	}
	conn.SetDeadline(time.Now().Add(waitTimeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if err != nil || !strings.HasPrefix(line, "INFO {") || !strings.Contains(line, `"tls_required":true`) {
		t.Errorf("over TLS, n2 said %q, %v; want its INFO, TLS required", line, err)
	}

	// Without a certificate, the handshake is refused (TLS 1.3: the client
	// learns it on its first read), and n2 logs it with the client's address.
	dialer.Config.Certificates = nil
	conn, err = dialer.DialContext(ctx, "tcp", n2Addr)
	if err == nil {
		conn.SetDeadline(time.Now().Add(waitTimeout))
		var got []byte
		got, err = io.ReadAll(conn)
		conn.Close()
		if len(got) != 0 {
			t.Errorf("a TLS client without a certificate read %q", got)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a TLS client without a certificate: %v; want the handshake refused", err)
	}
	eventually(t, "n2 logs the client without a certificate", func() error {
		want := `level=WARN msg="route TLS handshake failed; the route is refused" node=n2 peer_addr=` + conn.LocalAddr().String() +
			` reason="the peer presented no certificate"`
		if !strings.Contains(logs[1].String(), want) {
			return errors.New("n2's log lacks " + want)
		}
		return nil
	})
	for i := range logs {
		if strings.Contains(logs[i].String(), secret) {
			t.Errorf("n%d's log holds the secret", i+1)
		}
	}
}

// TestRouteTLSRefused starts a cluster of three with route TLS, then
// restarts n3 with a certificate of another CA (and that CA as its
// bundle), then without route TLS: n3 never routes to the others and
// Ready says why when it gives up; n1 and n2 stay ready, and every side
// logs the refusals at Warn with the peer's address.
func TestRouteTLSRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := newCA(t, dir, "sluice"), newCA(t, dir, "other")
	var logs [4]logBuffer // n1, n2, n3 of the other CA, n3 without TLS
	all := []string{"0", "1", "2"}
	var cfgs []natsnode.Config
	for i := range 3 {
		cfg := ca.withTLS(t, natsnode.Config{Cluster: "tls", Node: fmt.Sprint("n", i+1), ClusterAddr: fmt.Sprint(i), Peers: all})
		if i < 2 {
			// Debug, here and for n3: a failure repeated with the same
			// host (all are 127.0.0.1 here) and reason within 30 s is
			// logged at Debug.
			cfg.Logger = logs[i].logger(slog.LevelDebug)
		}
		cfgs = append(cfgs, cfg)
	}
	nodes := startNodes(t, 3, cfgs)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i := range logs {
			for l := range strings.Lines(logs[i].String()) {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
					t.Logf("log %d: %s", i, l)
				}
			}
		}
	})
	n1, n2 := nodes[0], nodes[1]
	ready := func(when string, nodes ...*natsnode.Node) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for _, n := range nodes {
			if err := n.Ready(ctx); err != nil {
				t.Fatalf("%s %s: %v", n.Name(), when, err)
			}
		}
	}
	ready("with route TLS", nodes...)
	n2Addr, n3Addr := n2.Config().ClusterAddr, nodes[2].Config().ClusterAddr
	restart := func(log *logBuffer, modify func(*natsnode.Config)) *natsnode.Node {
		t.Helper()
		cfg := nodes[2].Config()
		nodes[2].Close()
		cfg.Logger = log.logger(slog.LevelDebug)
		modify(&cfg)
		n, err := natsnode.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		nodes[2] = n
		return n
	}
	refused := `msg="route TLS handshake failed; the route is refused" node=`
	// hasRefusal reports whether log has a refusal by node of the route
	// with the peer at addr (a route address, or a host whose port is the
	// peer's own) saying reason.
	hasRefusal := func(log, node, addr, reason string) bool {
		for l := range strings.Lines(log) {
			if strings.Contains(l, refused+node+" peer_addr="+addr) && strings.Contains(l, reason) {
				return true
			}
		}
		return false
	}
	// Each refusal is logged at Warn first.
	defer func() {
		for i := range logs {
			if log := logs[i].String(); log != "" && !strings.Contains(log, "level=WARN "+refused) {
				t.Errorf("log %d has no refusal at Warn", i)
			}
		}
	}()

	// n3 with a certificate of another CA.
	n3 := restart(&logs[2], func(cfg *natsnode.Config) {
		cfg.ClusterTLSCert, cfg.ClusterTLSKey = other.issue(t, "n3-other", nil)
		cfg.ClusterTLSCA = other.file
	})
	notOurCA := "the peer's certificate is not signed by a CA of this node's CA bundle"
	err := readyUntil(t, n3, func() bool {
		return hasRefusal(logs[2].String(), "n3", n2Addr, notOurCA) && hasRefusal(logs[1].String(), "n2", n3Addr, notOurCA)
	})
	if !errors.Is(err, natsnode.ErrRouteTLS) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready: %v\nwant ErrRouteTLS and Canceled", err)
	}
	if p := n3.Peers(); len(p) != 0 {
		t.Errorf("n3 of another CA has peers %+v", p)
	}
	// n2 refused the routes n3 dialled too (from an ephemeral port), or
	// n3 refused n2's certificate before n2 could (TLS 1.3: the client
	// verifies first).
	if !hasRefusal(logs[1].String(), "n2", "127.0.0.1:", "") {
		t.Errorf("n2's log has no refusal")
	}
	eventually(t, "n1 and n2 routed to each other only", func() error {
		for _, n := range []*natsnode.Node{n1, n2} {
			if p := n.Peers(); len(p) != 1 {
				return fmt.Errorf("%s's peers with n3 of another CA: %+v", n.Name(), p)
			}
		}
		return nil
	})
	ready("with n3 of another CA", n1, n2)

	// n3 without route TLS.
	n3 = restart(&logs[3], func(cfg *natsnode.Config) {
		cfg.ClusterTLSCert, cfg.ClusterTLSKey, cfg.ClusterTLSCA = "", "", ""
	})
	noTLS := "the peer does not use TLS on its routes"
	err = readyUntil(t, n3, func() bool {
		// n2 that dialled n3 (it may see n3's plain INFO, or n3 close the
		// connection first), and n2 that n3 dialled.
		return hasRefusal(logs[1].String(), "n2", n3Addr, "") && hasRefusal(logs[1].String(), "n2", "127.0.0.1:", noTLS) &&
			hasRefusal(logs[3].String(), "n3", "127.0.0.1:", "most likely it uses route TLS and this node does not")
	})
	if !errors.Is(err, natsnode.ErrRouteTLS) {
		t.Fatalf("Ready: %v\nwant ErrRouteTLS", err)
	}
	if p := n3.Peers(); len(p) != 0 {
		t.Errorf("n3 without TLS has peers %+v", p)
	}
	if !strings.Contains(logs[3].String(), "routes_tls=false") {
		t.Errorf("n3's start line lacks routes_tls=false")
	}
	ready("with n3 without TLS", n1, n2)
}

// TestRouteTLSRejectsBad: the route TLS files are checked at Start, and
// the error names the file and what is wrong with it, without quoting a
// key.
func TestRouteTLSRejectsBad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := newCA(t, dir, "sluice"), newCA(t, dir, "other")
	cert, key := ca.issue(t, "n1", nil)
	_, otherKey := ca.issue(t, "n2", nil)
	otherCert, otherCertKey := other.issue(t, "n1-other", nil)
	expired, expiredKey := ca.issue(t, "expired", func(c *x509.Certificate) { c.NotAfter = time.Now().Add(-time.Minute) })
	serverOnly, serverOnlyKey := ca.issue(t, "server-only", func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	})
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	keyBody := strings.Split(read(key), "\n")[1] // a line of the key's base64
	caWithKey := file("ca-with-key.pem", read(ca.file)+read(key))
	missing := filepath.Join(dir, "missing.pem")
	peers := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	for _, tc := range []struct {
		name          string
		cert, key, ca string
		peers         []string
		want          string
	}{
		{"without peers", cert, key, ca.file, nil, "cluster TLS files are set but there are no peers"},
		{"only a certificate", cert, "", "", peers, "cluster TLS needs a certificate, its key and a CA bundle; the key (ClusterTLSKey) and the CA bundle (ClusterTLSCA) are missing"},
		{"no key", cert, "", ca.file, peers, "; the key (ClusterTLSKey) is missing"},
		{"no CA", cert, key, "", peers, "; the CA bundle (ClusterTLSCA) is missing"},
		{"no certificate", "", key, ca.file, peers, "; the certificate (ClusterTLSCert) is missing"},
		{"certificate missing", missing, key, ca.file, peers, "cluster TLS certificate: open " + missing + ": no such file or directory"},
		{"key missing", cert, missing, ca.file, peers, "cluster TLS key: open " + missing},
		{"CA missing", cert, key, missing, peers, "cluster TLS CA bundle: open " + missing},
		{"certificate not PEM", file("garbage.pem", "not a certificate\n"), key, ca.file, peers, "garbage.pem: holds no PEM certificate"},
		{"certificate broken", file("broken.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), key, ca.file, peers,
			"broken.pem: PEM block 1 is not a valid certificate"},
		{"key of another certificate", cert, otherKey, ca.file, peers, "cluster TLS key " + otherKey + " does not go with certificate " + cert + ": tls: private key does not match public key"},
		{"a certificate as the key", cert, cert, ca.file, peers, "tls: found a certificate rather than a key in the PEM for the private key"},
		{"CA without certificates", cert, key, file("empty-ca.pem", ""), peers, "cluster TLS CA bundle " + filepath.Join(dir, "empty-ca.pem") + ": holds no PEM certificate"},
		{"CA with a private key", cert, key, caWithKey, peers, "ca-with-key.pem: PEM block 2 is a private key (PRIVATE KEY)"},
		{"certificate of another CA", otherCert, otherCertKey, ca.file, peers,
			"cluster TLS certificate " + otherCert + " (CN=n1-other) does not verify against CA bundle " + ca.file + ": it is not signed by a CA of the bundle (its issuer: CN=other)"},
		{"expired", expired, expiredKey, ca.file, peers, "a certificate of the chain has expired or is not valid yet (this one is valid from"},
		{"for servers only", serverOnly, serverOnlyKey, ca.file, peers, "its extended key usage must allow both TLS servers and clients (serverAuth and clientAuth)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := natsnode.Config{Cluster: "c", Node: "n1", Dir: t.TempDir(), Peers: tc.peers,
				ClusterTLSCert: tc.cert, ClusterTLSKey: tc.key, ClusterTLSCA: tc.ca}
			if tc.peers != nil {
				cfg.ClusterAddr = peers[0]
			}
			err := startRefused(t, cfg, tc.want)
			if strings.Contains(err.Error(), keyBody) || strings.Contains(err.Error(), "BEGIN PRIVATE KEY") {
				t.Errorf("Start: %v quotes a file", err)
			}
		})
	}
}

// TestRouteTLSHostWarning: a node whose certificate does not name the host
// of its route address says so at Start, since its peers would refuse it.
func TestRouteTLSHostWarning(t *testing.T) {
	t.Parallel()
	ca := newCA(t, t.TempDir(), "sluice")
	var log logBuffer
	cfg := natsnode.Config{Cluster: "c", Node: "n1", ClusterAddr: "0", Peers: []string{"0", "1"}, Logger: log.logger(slog.LevelInfo)}
	cfg.ClusterTLSCert, cfg.ClusterTLSKey = ca.issue(t, "elsewhere", func(c *x509.Certificate) {
		c.IPAddresses, c.DNSNames = []net.IP{net.IPv4(10, 0, 0, 9)}, []string{"n1.example"}
	})
	cfg.ClusterTLSCA = ca.file
	startNodes(t, 2, []natsnode.Config{cfg})
	want := `level=WARN msg="the cluster TLS certificate does not name this node's route host 127.0.0.1: peers that dial it there refuse it`
	if !strings.Contains(log.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, log.String())
	}
}
