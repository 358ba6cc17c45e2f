package main

import (
	"os"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// runKubectl is a kubectl fallback for machines without one: it behaves as
// if invoked as "kubectl ARGS...".
func runKubectl(args []string) int {
	os.Args = append([]string{"kubectl"}, args...)
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		cmdutil.CheckErr(err) // prints and exits like kubectl does
	}
	return 0
}
