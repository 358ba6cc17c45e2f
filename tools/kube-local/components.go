package main

import (
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // same as upstream mains
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// Each component runs in its own process of this binary: the upstream
// commands register global flags and metrics, so two of them must never
// share a process.

func runAPIServer(args []string) int {
	cmd := apiserverapp.NewAPIServerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runControllerManager(args []string) int {
	cmd := cmapp.NewControllerManagerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func runScheduler(args []string) int {
	cmd := schedapp.NewSchedulerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}
