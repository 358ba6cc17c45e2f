package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var allComponents = []string{"etcd", "apiserver", "controller-manager", "scheduler"}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

type upOptions struct {
	dataDir     string
	port        int
	components  []string
	detach      bool
	compaction  string
	extra       map[string]*multiFlag
	readyTimout time.Duration
}

func runUp(args []string) int {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	o := upOptions{extra: map[string]*multiFlag{}}
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (required); created if missing")
	fs.IntVar(&o.port, "port", 0, "apiserver secure port on 127.0.0.1 (0 = reuse the one in config.json or pick a free one)")
	comps := fs.String("components", strings.Join(allComponents, ","), "components to run")
	fs.BoolVar(&o.detach, "detach", false, "run in the background; return once the apiserver is ready")
	fs.StringVar(&o.compaction, "etcd-compaction-interval", "", "apiserver --etcd-compaction-interval (empty = apiserver default; persisted)")
	fs.DurationVar(&o.readyTimout, "ready-timeout", 60*time.Second, "with --detach: how long to wait for /readyz")
	for _, c := range allComponents {
		m := &multiFlag{}
		o.extra[c] = m
		fs.Var(m, c+"-arg", "extra flag for "+c+" (repeatable), e.g. --"+c+"-arg=--v=2")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.dataDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "up: --data-dir is required and no positional arguments are accepted")
		return 2
	}
	abs, err := filepath.Abs(o.dataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "up:", err)
		return 1
	}
	o.dataDir = abs
	for _, c := range strings.Split(*comps, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !contains(allComponents, c) {
			fmt.Fprintf(os.Stderr, "up: unknown component %q (known: %s)\n", c, strings.Join(allComponents, ","))
			return 2
		}
		o.components = append(o.components, c)
	}
	l := layout{dir: o.dataDir}
	if pid := readPid(l.PidFile()); alive(pid, "up") {
		fmt.Fprintf(os.Stderr, "up: already running for %s (supervisor pid %d); run 'kube-local down --data-dir %s' first\n", o.dataDir, pid, o.dataDir)
		return 1
	}
	cfg, err := prepare(l, o.port, o.compaction)
	if err != nil {
		fmt.Fprintln(os.Stderr, "up:", err)
		return 1
	}
	if o.detach {
		return detach(l, cfg, args, o.readyTimout)
	}
	return supervise(l, cfg, o)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// detach re-executes "up" without --detach in a new session, then waits for
// the apiserver to report ready.
func detach(l layout, cfg *config, args []string, timeout time.Duration) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "up:", err)
		return 1
	}
	var childArgs []string
	for _, a := range args {
		if a == "--detach" || a == "-detach" || strings.HasPrefix(a, "--detach=") || strings.HasPrefix(a, "-detach=") {
			continue
		}
		childArgs = append(childArgs, a)
	}
	logf, err := os.OpenFile(l.Log("up"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "up:", err)
		return 1
	}
	defer logf.Close()
	devnull, _ := os.Open(os.DevNull)
	cmd := exec.Command(self, append([]string{"up"}, childArgs...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "up: start supervisor:", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	client := readyClient(l)
	deadline := time.After(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			fmt.Fprintf(os.Stderr, "up: supervisor exited before the apiserver was ready: %v\n", err)
			dumpLogs(l)
			return 1
		case <-deadline:
			fmt.Fprintf(os.Stderr, "up: apiserver not ready after %s; stopping the supervisor\n", timeout)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			dumpLogs(l)
			return 1
		case <-tick.C:
			if client != nil && readyz(client, l.APIServerURL(cfg)) == nil {
				fmt.Fprintf(os.Stderr, "up: apiserver ready at %s after %.1fs (supervisor pid %d, logs in %s)\n",
					l.APIServerURL(cfg), time.Since(start).Seconds(), cmd.Process.Pid, l.p("logs"))
				fmt.Println(l.AdminKubeconfig())
				_ = cmd.Process.Release()
				return 0
			}
		}
	}
}

func dumpLogs(l layout) {
	for _, name := range []string{"up", "etcd", "apiserver"} {
		lines := tail(l.Log(name), 30)
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "---- last %d lines of %s ----\n", len(lines), l.Log(name))
		for _, s := range lines {
			fmt.Fprintln(os.Stderr, s)
		}
	}
}

func tail(file string, n int) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}

func readyClient(l layout) *http.Client {
	p := l.PKI()
	caPEM, err := os.ReadFile(p.CACert())
	if err != nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(p.Cert("admin"), p.Key("admin"))
	if err != nil {
		return nil
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
			DisableKeepAlives: true,
		},
	}
}

func readyz(c *http.Client, server string) error {
	resp, err := c.Get(server + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "ok" {
		return fmt.Errorf("readyz: %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// componentArgs builds the command line of each component.
func componentArgs(l layout, c *config, name string) []string {
	p := l.PKI()
	etcdURL := "https://127.0.0.1:" + strconv.Itoa(c.EtcdClientPort)
	switch name {
	case "etcd":
		peer := "https://127.0.0.1:" + strconv.Itoa(c.EtcdPeerPort)
		return []string{
			"--name=kube-local", "--data-dir=" + l.EtcdDir(),
			"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=kube-local=" + peer,
			"--cert-file=" + p.Cert("etcd-server"), "--key-file=" + p.Key("etcd-server"),
			"--trusted-ca-file=" + p.CACert(), "--client-cert-auth",
			"--peer-cert-file=" + p.Cert("etcd-server"), "--peer-key-file=" + p.Key("etcd-server"),
			"--peer-trusted-ca-file=" + p.CACert(), "--peer-client-cert-auth",
		}
	case "apiserver":
		a := []string{
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(c.APIServerPort),
			"--tls-cert-file=" + p.Cert("apiserver"), "--tls-private-key-file=" + p.Key("apiserver"),
			"--client-ca-file=" + p.CACert(),
			"--etcd-servers=" + etcdURL, "--etcd-cafile=" + p.CACert(),
			"--etcd-certfile=" + p.Cert("apiserver-etcd-client"), "--etcd-keyfile=" + p.Key("apiserver-etcd-client"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + p.SAPub(),
			"--service-account-signing-key-file=" + p.SAKey(),
			"--api-audiences=https://kubernetes.default.svc",
			"--service-cluster-ip-range=10.96.0.0/24",
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			// Endpoints may not point at loopback; nothing routes to the
			// service IP anyway.
			"--endpoint-reconciler-type=none",
			"--profiling=false",
			"--kubelet-client-certificate=" + p.Cert("apiserver-kubelet-client"),
			"--kubelet-client-key=" + p.Key("apiserver-kubelet-client"),
			"--kubelet-certificate-authority=" + p.CACert(),
			// Every kubelet here is on loopback: simulated nodes advertise
			// ExternalIP 127.0.0.1 beside their made-up InternalIP, which
			// nothing routes to, and their Hostname does not resolve.
			"--kubelet-preferred-address-types=ExternalIP,InternalIP,Hostname",
		}
		if c.EtcdCompactionInterval != "" {
			a = append(a, "--etcd-compaction-interval="+c.EtcdCompactionInterval)
		}
		return a
	case "controller-manager":
		kc := l.Kubeconfig("controller-manager")
		return []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			// No front proxy: take the client CA from the flag instead of the
			// extension-apiserver-authentication ConfigMap.
			"--authentication-skip-lookup=true", "--client-ca-file=" + p.CACert(),
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.ControllerManagerPort),
			"--flex-volume-plugin-dir=" + l.p("flexvolume"),
			"--tls-cert-file=" + p.Cert("serving"), "--tls-private-key-file=" + p.Key("serving"),
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + p.SAKey(),
			"--root-ca-file=" + p.CACert(),
			"--cluster-signing-cert-file=" + p.CACert(), "--cluster-signing-key-file=" + p.CAKey(),
			"--service-cluster-ip-range=10.96.0.0/24",
			"--controllers=*",
			"--leader-elect=false",
			"--profiling=false",
		}
	case "scheduler":
		kc := l.Kubeconfig("scheduler")
		return []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--authentication-skip-lookup=true", "--client-ca-file=" + p.CACert(),
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.SchedulerPort),
			"--tls-cert-file=" + p.Cert("serving"), "--tls-private-key-file=" + p.Key("serving"),
			"--leader-elect=false",
			"--profiling=false",
		}
	}
	return nil
}

// spawner starts children from one OS thread that never exits, so that
// Pdeathsig (tied to the creating thread) fires only when the supervisor dies.
type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

var spawnCh = make(chan spawnReq)

func init() {
	go func() {
		runtime.LockOSThread()
		for r := range spawnCh {
			r.err <- r.cmd.Start()
		}
	}()
}

type child struct {
	name string
	args []string
	l    layout

	mu       sync.Mutex
	proc     *os.Process
	stopping bool
	stopCh   chan struct{} // closed by stop
	done     chan struct{}
}

func (c *child) loop(self string) {
	defer close(c.done)
	backoff := 500 * time.Millisecond
	for {
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			return
		}
		logf, err := os.OpenFile(c.l.Log(c.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.mu.Unlock()
			log.Printf("%s: open log: %v", c.name, err)
			return
		}
		fmt.Fprintf(logf, "==== kube-local: starting %s at %s ====\n", c.name, time.Now().Format(time.RFC3339))
		cmd := exec.Command(self, append([]string{c.name}, c.args...)...)
		cmd.Dir = c.l.dir
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		req := spawnReq{cmd: cmd, err: make(chan error, 1)}
		spawnCh <- req
		err = <-req.err
		logf.Close()
		if err != nil {
			c.mu.Unlock()
			log.Printf("%s: start failed: %v", c.name, err)
		} else {
			c.proc = cmd.Process
			c.mu.Unlock()
			_ = writeFileAtomic(c.l.ChildPid(c.name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
			log.Printf("%s: started, pid %d", c.name, cmd.Process.Pid)
			t0 := time.Now()
			werr := cmd.Wait()
			_ = os.Remove(c.l.ChildPid(c.name))
			c.mu.Lock()
			c.proc = nil
			stopping := c.stopping
			c.mu.Unlock()
			if stopping {
				log.Printf("%s: stopped (%v)", c.name, exitStr(werr))
				return
			}
			if time.Since(t0) > 30*time.Second {
				backoff = 500 * time.Millisecond
			}
			log.Printf("%s: exited unexpectedly (%v) after %s; restarting in %s", c.name, exitStr(werr), time.Since(t0).Round(time.Millisecond), backoff)
		}
		select {
		case <-time.After(backoff):
		case <-c.stopCh:
		}
		if backoff *= 2; backoff > 5*time.Second {
			backoff = 5 * time.Second
		}
	}
}

func exitStr(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stop sends SIGTERM, and SIGKILL after grace.
func (c *child) stop(grace time.Duration) {
	c.mu.Lock()
	if !c.stopping {
		c.stopping = true
		close(c.stopCh)
	}
	if c.proc != nil {
		_ = c.proc.Signal(syscall.SIGTERM)
	}
	c.mu.Unlock()
	select {
	case <-c.done:
		return
	case <-time.After(grace):
	}
	c.mu.Lock()
	if c.proc != nil {
		log.Printf("%s: did not stop within %s; killing", c.name, grace)
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
		_ = c.proc.Kill()
	}
	c.mu.Unlock()
	<-c.done
}

// killStale kills component processes left behind by a supervisor that died
// without cleaning up (they would hold the ports).
func killStale(l layout) {
	for _, name := range allComponents {
		if pid := readPid(l.ChildPid(name)); alive(pid, name) {
			log.Printf("%s: killing stale process %d", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for i := 0; i < 50 && alive(pid, name); i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		_ = os.Remove(l.ChildPid(name))
	}
}

func supervise(l layout, cfg *config, o upOptions) int {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("kube-local up: ")
	self, err := os.Executable()
	if err != nil {
		log.Print(err)
		return 1
	}
	if err := writeFileAtomic(l.PidFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		log.Print(err)
		return 1
	}
	defer func() {
		if readPid(l.PidFile()) == os.Getpid() {
			_ = os.Remove(l.PidFile())
		}
	}()
	killStale(l)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stopSig os.Signal
	go func() {
		stopSig = <-sigs
		cancel()
	}()
	log.Printf("data dir %s, apiserver %s, components %s", l.dir, l.APIServerURL(cfg), strings.Join(o.components, ","))
	var running []*child
	t0 := time.Now()
	start := func(name string) *child {
		args := append(componentArgs(l, cfg, name), (*o.extra[name])...)
		c := &child{name: name, args: args, l: l, done: make(chan struct{}), stopCh: make(chan struct{})}
		running = append(running, c)
		go c.loop(self)
		return c
	}
	waitFor := func(what string, check func() error) bool {
		for i := 0; ; i++ {
			if check() == nil {
				log.Printf("%s after %.1fs", what, time.Since(t0).Seconds())
				return true
			}
			if i > 0 && i%50 == 0 {
				log.Printf("still waiting: %s", what)
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	ok := true
	if contains(o.components, "etcd") {
		start("etcd")
		addr := "127.0.0.1:" + strconv.Itoa(cfg.EtcdClientPort)
		ok = waitFor("etcd accepting connections", func() error {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
			}
			return err
		})
	}
	if ok && contains(o.components, "apiserver") {
		start("apiserver")
		client := readyClient(l)
		ok = waitFor("apiserver ready", func() error {
			if client == nil {
				return errors.New("no client")
			}
			return readyz(client, l.APIServerURL(cfg))
		})
	}
	if ok {
		for _, name := range []string{"controller-manager", "scheduler"} {
			if contains(o.components, name) {
				start(name)
			}
		}
	}
	<-ctx.Done()
	log.Printf("%v received; stopping components", stopSig)
	for i := len(running) - 1; i >= 0; i-- {
		running[i].stop(10 * time.Second)
	}
	log.Printf("all components stopped")
	return 0
}
