package main

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// config is persisted in D/config.json so a restart on the same data dir
// reuses ports (and, via D/pki and D/etcd, identities and data).
type config struct {
	APIServerPort          int    `json:"apiserverPort"`
	EtcdClientPort         int    `json:"etcdClientPort"`
	EtcdPeerPort           int    `json:"etcdPeerPort"`
	ControllerManagerPort  int    `json:"controllerManagerPort"`
	SchedulerPort          int    `json:"schedulerPort"`
	EtcdCompactionInterval string `json:"etcdCompactionInterval,omitempty"`
}

// layout names the files of a data dir.
type layout struct{ dir string }

func (l layout) p(elem ...string) string { return filepath.Join(append([]string{l.dir}, elem...)...) }
func (l layout) ConfigFile() string      { return l.p("config.json") }
func (l layout) AdminKubeconfig() string { return l.p("admin.kubeconfig") }
func (l layout) Kubeconfig(c string) string {
	return l.p(c + ".kubeconfig")
}
func (l layout) PidFile() string          { return l.p("kube-local.pid") }
func (l layout) ChildPid(c string) string { return l.p("pids", c+".pid") }
func (l layout) Log(c string) string      { return l.p("logs", c+".log") }
func (l layout) EtcdDir() string          { return l.p("etcd") }
func (l layout) PKI() pki                 { return pki{dir: l.p("pki")} }
func (l layout) APIServerURL(c *config) string {
	return "https://127.0.0.1:" + strconv.Itoa(c.APIServerPort)
}

// freePort picks a free port on 127.0.0.1, preferably below the kernel's
// ephemeral range: ports are persisted and reused on restart, and a port
// from the ephemeral range may meanwhile be taken by some outgoing
// connection.
func freePort() (int, error) {
	lo, hi := 20000, 32000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph-1 < hi {
				hi = eph - 1
			}
		}
	}
	for i := 0; hi-lo > 100 && i < 50; i++ {
		port := lo + mrand.IntN(hi-lo)
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			ln.Close()
			return port, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func loadConfig(l layout) (*config, error) {
	b, err := os.ReadFile(l.ConfigFile())
	if err != nil {
		return nil, err
	}
	c := &config{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: %w", l.ConfigFile(), err)
	}
	return c, nil
}

// prepare loads or creates config.json, the PKI and the kubeconfigs. It is
// idempotent.
func prepare(l layout, port int, compaction string) (*config, error) {
	for _, d := range []string{l.dir, l.p("pids"), l.p("logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	c, err := loadConfig(l)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if c == nil {
		c = &config{}
	}
	if port != 0 {
		c.APIServerPort = port
	}
	if compaction != "" {
		c.EtcdCompactionInterval = compaction
	}
	used := map[int]bool{}
	for _, pp := range []*int{&c.APIServerPort, &c.EtcdClientPort, &c.EtcdPeerPort, &c.ControllerManagerPort, &c.SchedulerPort} {
		for *pp == 0 || used[*pp] {
			if *pp, err = freePort(); err != nil {
				return nil, err
			}
		}
		used[*pp] = true
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	if err := writeFileAtomic(l.ConfigFile(), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := l.PKI().ensure(); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	server := l.APIServerURL(c)
	for _, k := range []struct{ file, cert, user string }{
		{l.AdminKubeconfig(), "admin", "kube-local-admin"},
		{l.Kubeconfig("controller-manager"), "controller-manager", "system:kube-controller-manager"},
		{l.Kubeconfig("scheduler"), "scheduler", "system:kube-scheduler"},
	} {
		if err := writeCertKubeconfig(l, k.file, server, k.cert, k.user); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func writeCertKubeconfig(l layout, file, server, certName, user string) error {
	p := l.PKI()
	ca, err := os.ReadFile(p.CACert())
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(p.Cert(certName))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.Key(certName))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["kube-local"] = &clientcmdapi.Context{Cluster: "kube-local", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kube-local"
	return writeKubeconfig(file, cfg)
}

func writeKubeconfig(file string, cfg *clientcmdapi.Config) error {
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(file, b, 0o600)
}

func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// alive reports whether pid runs and is a kube-local process running the
// given subcommand ("" = any); a zombie counts as dead.
func alive(pid int, sub string) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
			return false
		}
	}
	cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
	if len(argv) < 2 {
		return false
	}
	return sub == "" || argv[1] == sub
}
