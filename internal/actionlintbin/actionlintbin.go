// Package actionlintbin finds actionlint for the test that lints the
// GitHub Actions workflows under .github/workflows (test/workflows):
// actionlint built from the github.com/rhysd/actionlint module that
// tools/actionlint pins as a tool dependency (its own module, so that
// actionlint's dependencies stay out of the project's go.mod), kept in the
// user cache directory (buildcache) and reused until tools/actionlint or
// the Go toolchain changes. A first build takes seconds (about 15 on two
// cores). The pinned version, rather than an actionlint on PATH, so that
// the findings are the same on every machine.
package actionlintbin

import (
	"os"
	"path/filepath"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// Env names the environment variable giving the path of an actionlint
// to use instead of the build.
const Env = "KUBEVENTS_TEST_ACTIONLINT"

// mainPackage is upstream's actionlint command, built unchanged.
const mainPackage = "github.com/rhysd/actionlint/cmd/actionlint"

// buildPrefix starts the name of each cached build's directory.
const buildPrefix = "actionlint-"

// moduleDir is tools/actionlint relative to the repository root.
var moduleDir = filepath.Join("tools", "actionlint")

// Binary returns the actionlint to use (see Env), building it on first
// use with `go build github.com/rhysd/actionlint/cmd/actionlint` in
// tools/actionlint.
func Binary() (string, error) {
	if p := os.Getenv(Env); p != "" {
		return p, nil
	}
	return buildcache.ModuleTool(moduleDir, mainPackage, buildPrefix, "actionlint")
}
