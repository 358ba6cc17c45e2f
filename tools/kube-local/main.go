package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	sub, args := os.Args[1], os.Args[2:]
	var code int
	switch sub {
	case "apiserver", "kube-apiserver":
		code = runAPIServer(args)
	case "controller-manager", "kube-controller-manager":
		code = runControllerManager(args)
	case "scheduler", "kube-scheduler":
		code = runScheduler(args)
	case "etcd":
		code = runEtcd(args)
	case "up":
		code = runUp(args)
	case "down":
		code = runDown(args)
	case "kubeconfig":
		code = runKubeconfig(args)
	case "compact":
		code = runCompact(args)
	case "kubectl":
		code = runKubectl(args)
	case "help", "-h", "--help":
		fmt.Print(usageText)
		code = 0
	default:
		fmt.Fprintf(os.Stderr, "kube-local: unknown subcommand %q\n", sub)
		usage()
		code = 2
	}
	os.Exit(code)
}

const usageText = `kube-local: a local Kubernetes control plane on 127.0.0.1 (Kubernetes v1.32.4, etcd v3.5.16)

Usage:
  kube-local up --data-dir D [--port P] [--components etcd,apiserver,controller-manager,scheduler]
                [--detach] [--ready-timeout 60s] [--etcd-compaction-interval 5m]
                [--etcd-arg=F] [--apiserver-arg=F] [--controller-manager-arg=F] [--scheduler-arg=F]
  kube-local down --data-dir D [--timeout 30s]
  kube-local kubeconfig --data-dir D --service-account NAMESPACE/NAME [--ttl 24h] -o FILE
  kube-local compact --data-dir D
  kube-local etcd|apiserver|controller-manager|scheduler [component flags]
  kube-local kubectl [kubectl args]     (built-in kubectl v1.32.4 fallback)

The admin kubeconfig is D/admin.kubeconfig.
`

func usage() {
	fmt.Fprint(os.Stderr, usageText)
}
