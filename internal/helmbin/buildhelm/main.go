// Command buildhelm builds helm for the tests (internal/helmbin) into the
// user cache directory, if it is not there yet, and prints its path: run
// once before the tests (.ci/run does), so that no test binary's time
// limit is spent on a first build.
//
//	go run ./internal/helmbin/buildhelm
package main

import (
	"fmt"
	"os"

	"github.com/kubevents/kubevents/internal/helmbin"
)

func main() {
	bin, err := helmbin.Binary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildhelm:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
