// Package promtoolbin finds Prometheus' promtool (and its server,
// Prometheus) for the tests that check
// and unit-test the shipped alerting rules (deploy/prometheus): promtool
// built from the github.com/prometheus/prometheus module that
// tools/promtool pins as a tool dependency (its own module, so that
// Prometheus' many dependencies stay out of the project's go.mod), kept
// in the user cache directory (buildcache) and reused until
// tools/promtool or the Go toolchain changes. It is built with
// Prometheus' remove_all_sd tag: without the service discovery plugins
// (and the cloud providers' SDKs they bring, minutes of compiling), which
// checking and unit-testing rules do not use. A first build takes a few
// minutes on two cores; later runs take none.
package promtoolbin

import (
	"os"
	"path/filepath"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// Env names the environment variable giving the path of a promtool to
// use instead of the build.
const Env = "KUBEVENTS_TEST_PROMTOOL"

// mainPackage is upstream's promtool command, built unchanged.
const mainPackage = "github.com/prometheus/prometheus/cmd/promtool"

// buildPrefix starts the name of each cached build's directory.
const buildPrefix = "promtool-"

// moduleDir is tools/promtool relative to the repository root.
var moduleDir = filepath.Join("tools", "promtool")

// Binary returns the promtool to use (see Env), building it on first use
// with `go build -tags=remove_all_sd github.com/prometheus/prometheus/cmd/promtool`
// in tools/promtool.
func Binary() (string, error) {
	if p := os.Getenv(Env); p != "" {
		return p, nil
	}
	return buildcache.ModuleTool(moduleDir, mainPackage, buildPrefix, "promtool", "-tags=remove_all_sd")
}

// PrometheusEnv names the environment variable giving the path of a
// Prometheus server to use instead of the build.
const PrometheusEnv = "KUBEVENTS_TEST_PROMETHEUS"

// Prometheus returns the Prometheus server to use (see PrometheusEnv),
// building it on first use as Binary builds promtool, from the same
// module (github.com/prometheus/prometheus/cmd/prometheus), with the same
// tag: static configurations only, which the tests' scrapes are.
func Prometheus() (string, error) {
	if p := os.Getenv(PrometheusEnv); p != "" {
		return p, nil
	}
	return buildcache.ModuleTool(moduleDir, "github.com/prometheus/prometheus/cmd/prometheus", "prometheus-", "prometheus", "-tags=remove_all_sd")
}
