package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd runs an embedded single-member etcd. It accepts the usual etcd
// flag names (a subset: the ones a local control plane needs).
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	name := fs.String("name", "default", "member name")
	dataDir := fs.String("data-dir", "", "path to the data directory (required)")
	listenClient := fs.String("listen-client-urls", "http://127.0.0.1:2379", "client URLs to listen on")
	advClient := fs.String("advertise-client-urls", "", "client URLs to advertise (default: listen-client-urls)")
	listenPeer := fs.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URLs to listen on")
	advPeer := fs.String("initial-advertise-peer-urls", "", "peer URLs to advertise (default: listen-peer-urls)")
	initialCluster := fs.String("initial-cluster", "", "initial cluster (default: NAME=initial-advertise-peer-urls)")
	listenMetrics := fs.String("listen-metrics-urls", "", "extra URLs for /metrics and /health")
	certFile := fs.String("cert-file", "", "client server TLS cert")
	keyFile := fs.String("key-file", "", "client server TLS key")
	caFile := fs.String("trusted-ca-file", "", "client server TLS trusted CA")
	clientCertAuth := fs.Bool("client-cert-auth", false, "require client certificates")
	peerCertFile := fs.String("peer-cert-file", "", "peer TLS cert")
	peerKeyFile := fs.String("peer-key-file", "", "peer TLS key")
	peerCAFile := fs.String("peer-trusted-ca-file", "", "peer TLS trusted CA")
	peerClientCertAuth := fs.Bool("peer-client-cert-auth", false, "require peer client certificates")
	quota := fs.Int64("quota-backend-bytes", 0, "backend size quota (0 = etcd default)")
	snapshotCount := fs.Uint64("snapshot-count", 0, "committed transactions per snapshot (0 = etcd default)")
	autoCompMode := fs.String("auto-compaction-mode", "periodic", "periodic or revision")
	autoCompRet := fs.String("auto-compaction-retention", "0", "auto compaction retention (0 = off)")
	noFsync := fs.Bool("unsafe-no-fsync", false, "disable fsync (unsafe; faster tests)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		return 2
	}
	parse := func(flagName, s string) ([]url.URL, error) {
		var out []url.URL
		for _, p := range strings.Split(s, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			u, err := url.Parse(p)
			if err != nil {
				return nil, fmt.Errorf("--%s: %v", flagName, err)
			}
			out = append(out, *u)
		}
		return out, nil
	}
	if *advClient == "" {
		*advClient = *listenClient
	}
	if *advPeer == "" {
		*advPeer = *listenPeer
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	var err error
	if cfg.ListenClientUrls, err = parse("listen-client-urls", *listenClient); err == nil {
		if cfg.AdvertiseClientUrls, err = parse("advertise-client-urls", *advClient); err == nil {
			if cfg.ListenPeerUrls, err = parse("listen-peer-urls", *listenPeer); err == nil {
				if cfg.AdvertisePeerUrls, err = parse("initial-advertise-peer-urls", *advPeer); err == nil && *listenMetrics != "" {
					cfg.ListenMetricsUrls, err = parse("listen-metrics-urls", *listenMetrics)
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 2
	}
	if *initialCluster == "" {
		*initialCluster = *name + "=" + *advPeer
	}
	cfg.InitialCluster = *initialCluster
	cfg.ClientTLSInfo.CertFile = *certFile
	cfg.ClientTLSInfo.KeyFile = *keyFile
	cfg.ClientTLSInfo.TrustedCAFile = *caFile
	cfg.ClientTLSInfo.ClientCertAuth = *clientCertAuth
	cfg.PeerTLSInfo.CertFile = *peerCertFile
	cfg.PeerTLSInfo.KeyFile = *peerKeyFile
	cfg.PeerTLSInfo.TrustedCAFile = *peerCAFile
	cfg.PeerTLSInfo.ClientCertAuth = *peerClientCertAuth
	if *quota > 0 {
		cfg.QuotaBackendBytes = *quota
	}
	if *snapshotCount > 0 {
		cfg.SnapshotCount = *snapshotCount
	}
	cfg.AutoCompactionMode = *autoCompMode
	cfg.AutoCompactionRetention = *autoCompRet
	cfg.UnsafeNoFsync = *noFsync
	cfg.LogLevel = *logLevel
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd: start:", err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", *advClient)
	case <-time.After(60 * time.Second):
		e.Close()
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", s)
		e.Close()
		return 0
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd: error:", err)
		e.Close()
		return 1
	}
}
