// Command kubectl is kubectl built from the k8s.io/kubectl module, for test
// machines without a kubectl on PATH. It is its own module so that its
// dependencies stay out of the project's go.mod.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
		os.Exit(1)
	}
}
