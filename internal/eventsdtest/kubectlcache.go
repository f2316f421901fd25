package eventsdtest

import (
	"crypto/sha256"
	"encoding/hex"

	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// kubectlBuildPrefix starts the name of each cached build's directory,
// followed by its key.
const kubectlBuildPrefix = "kubectl-"

// kubectlSources are the files of tools/kubectl a build depends on.
var kubectlSources = []string{"go.mod", "go.sum", "main.go"}

// kubectlKey identifies a build of the module in srcDir: the hash of its
// sources (go.sum pins every dependency) and of the toolchain and
// platform that build it.
func kubectlKey(srcDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range kubectlSources {
		f, err := os.Open(filepath.Join(srcDir, name))
		if err != nil {
			return "", fmt.Errorf("hashing the kubectl module: %w", err)
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hashing the kubectl module: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
