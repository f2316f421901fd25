// Command build builds containerd 2.x, its runc shim, ctr and crictl from
// tools/containerd into the user cache directory, where the tests that
// run a real containerd (internal/containerdproc) find them, and prints
// where. A first build takes minutes; a cached one nothing.
//
//	go run ./internal/containerdproc/build
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/kubevents/kubevents/internal/containerdproc"
)

func main() {
	begun := time.Now()
	b, err := containerdproc.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "containerd build:", err)
		os.Exit(1)
	}
	fmt.Printf("containerd %s, containerd-shim-runc-v2, ctr and crictl in %s (%v)\n", b.Version, b.Dir, time.Since(begun).Round(time.Second))
}
