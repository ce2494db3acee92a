package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicemq/sluice"
	"github.com/sluicemq/sluice/internal/admin"
	"github.com/sluicemq/sluice/internal/sqs"
)

// ServeConfig is the configuration of `sluice serve`. Every field has a
// flag and a SLUICE_* environment variable (flag wins); docs/configuration.md
// documents them.
type ServeConfig struct {
	SQSAddr     string // --sqs-addr, SLUICE_SQS_ADDR, default 127.0.0.1:9324
	AdminAddr   string // --admin-addr, SLUICE_ADMIN_ADDR, default 127.0.0.1:9325
	DataDir     string // --data-dir, SLUICE_DATA_DIR, default ./sluice-data
	Sync        string // --sync, SLUICE_SYNC: always|batch|none, default always
	Credentials string // --credentials, SLUICE_CREDENTIALS: credentials JSON file
	Region      string // --region, SLUICE_REGION, default us-east-1
	AccountID   string // --account-id, SLUICE_ACCOUNT_ID, default 000000000000
	LogLevel    string // --log-level, SLUICE_LOG_LEVEL: debug|info|warn|error, default info
	Insecure    bool   // --insecure, SLUICE_INSECURE: allow a non-loopback address without credentials
	BaseURL     string // --base-url, SLUICE_BASE_URL: queue URL base instead of the request's Host
	Preallocate bool   // --preallocate, SLUICE_PREALLOCATE: prepare log segments full of zeros, default true
}

func serveFlags(env Env) (*flag.FlagSet, *ServeConfig) {
	c := &ServeConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	def := func(name, fallback string) string {
		if v := env.Getenv(name); v != "" {
			return v
		}
		return fallback
	}
	fs.StringVar(&c.SQSAddr, "sqs-addr", def("SLUICE_SQS_ADDR", "127.0.0.1:9324"), "SQS API listen address")
	fs.StringVar(&c.AdminAddr, "admin-addr", def("SLUICE_ADMIN_ADDR", "127.0.0.1:9325"), "admin listen address: /metrics, /api, the dashboard at /ui, /healthz, /debug/pprof")
	fs.StringVar(&c.DataDir, "data-dir", def("SLUICE_DATA_DIR", "./sluice-data"), "data directory")
	fs.StringVar(&c.Sync, "sync", def("SLUICE_SYNC", "always"), "durability: always (fsync before answering), batch (fsync every 10ms), none")
	fs.StringVar(&c.Credentials, "credentials", def("SLUICE_CREDENTIALS", ""), "credentials JSON file; enables SigV4 verification")
	fs.StringVar(&c.Region, "region", def("SLUICE_REGION", "us-east-1"), "region used in ARNs")
	fs.StringVar(&c.AccountID, "account-id", def("SLUICE_ACCOUNT_ID", "000000000000"), "12-digit account id in ARNs and queue URLs")
	fs.StringVar(&c.LogLevel, "log-level", def("SLUICE_LOG_LEVEL", "info"), "debug, info, warn or error")
	fs.BoolVar(&c.Insecure, "insecure", def("SLUICE_INSECURE", "") == "true" || def("SLUICE_INSECURE", "") == "1", "allow a non-loopback address without a credentials file")
	fs.StringVar(&c.BaseURL, "base-url", def("SLUICE_BASE_URL", ""), "base of queue URLs (default: the request's scheme and Host)")
	pre := def("SLUICE_PREALLOCATE", "true")
	fs.BoolVar(&c.Preallocate, "preallocate", pre != "false" && pre != "0", "prepare each next log segment full of zeros (faster fsync on ext4/XFS; turn off on btrfs/ZFS)")
	return fs, c
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serve(ctx context.Context, args []string, env Env) error {
	fs, c := serveFlags(env)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	var creds *sqs.Credentials
	if c.Credentials != "" {
		var err error
		if creds, err = sqs.LoadCredentials(c.Credentials); err != nil {
			return err
		}
	} else if !c.Insecure && (!isLoopback(c.SQSAddr) || !isLoopback(c.AdminAddr)) {
		return fmt.Errorf("refusing to listen on a non-loopback address (%s, %s) without --credentials: anyone could read and write every queue; pass --insecure to do it anyway", c.SQSAddr, c.AdminAddr)
	}
	switch c.Sync {
	case "always", "batch", "none":
	default:
		return fmt.Errorf("--sync must be always, batch or none, not %q", c.Sync)
	}
	b, err := sluice.Open(sluice.Config{Dir: c.DataDir, Sync: sluice.SyncMode(c.Sync), Region: c.Region, AccountID: c.AccountID, Logger: log,
		NoPreallocate: !c.Preallocate})
	if err != nil {
		return err
	}
	defer b.Close()
	srv := sqs.NewServer(sqs.ServerConfig{Region: c.Region, AccountID: c.AccountID, BaseURL: c.BaseURL, Credentials: creds, Logger: log}, b)
	ln, err := net.Listen("tcp", c.SQSAddr)
	if err != nil {
		return err
	}
	aln, err := net.Listen("tcp", c.AdminAddr)
	if err != nil {
		ln.Close()
		return err
	}
	adm := admin.New(b, admin.Options{Logger: log, Collectors: []prometheus.Collector{srv.Collector()}})
	adm.Start()
	defer adm.Stop()
	mux := http.NewServeMux()
	mux.Handle("/", adm) // metrics, the JSON API and the dashboard
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	// Profiles for operators, on the admin address only.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/heap", pprof.Index)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	admin := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() {
		if err := admin.Serve(aln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	auth := "off (any signature accepted)"
	if creds != nil {
		auth = "SigV4 with " + c.Credentials
	}
	log.Info("sluice serving", "sqs", "http://"+ln.Addr().String(), "admin", "http://"+aln.Addr().String(),
		"data_dir", c.DataDir, "sync", c.Sync, "auth", auth)
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests")
	case err := <-errc:
		if err != nil {
			log.Error("server failed", "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = admin.Shutdown(sctx)
	if err := srv.Shutdown(sctx); err != nil && !strings.Contains(err.Error(), "closed") {
		log.Warn("shutdown", "err", err)
	}
	if err := b.Close(); err != nil {
		return err
	}
	log.Info("stopped; store flushed and closed")
	return nil
}
