package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// runCompact compacts the etcd of a data dir to its current revision, so
// that older resourceVersions are gone (watches from them get 410 Gone once
// they reach etcd; see README for the apiserver watch cache).
func runCompact(args []string) int {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "data directory (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "compact: --data-dir is required")
		return 2
	}
	rev, err := compact(layout{dir: *dataDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "compact:", err)
		return 1
	}
	fmt.Printf("compacted to revision %d\n", rev)
	return 0
}

func compact(l layout) (int64, error) {
	cfg, err := loadConfig(l)
	if err != nil {
		return 0, err
	}
	p := l.PKI()
	caPEM, err := os.ReadFile(p.CACert())
	if err != nil {
		return 0, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(p.Cert("apiserver-etcd-client"), p.Key("apiserver-etcd-client"))
	if err != nil {
		return 0, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://127.0.0.1:" + strconv.Itoa(cfg.EtcdClientPort)},
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "compact_rev_key")
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	return rev, nil
}
