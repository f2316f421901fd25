package readme

import (
	"strings"
	"testing"

	"github.com/kubevents/kubevents/internal/doctest"
)

// pageTests are the pages whose ```sh blocks a test of this package runs
// (each accounting for every block of its page with pageBlocks or, for
// install.md, its notRun map), by the test.
var pageTests = map[string]string{
	"docs/install.md":                 "TestInstallCommands (and test/cluster on a real node)",
	"docs/keep-events-longer.md":      "TestKeepEventsLongerCommands",
	"docs/etcd.md":                    "TestEtcdCommands",
	"docs/export.md":                  "TestExportPage",
	"docs/folding-and-rate-limits.md": "TestFoldingPage",
	"docs/nodeagent.md":               "TestNodeagentPage",
	"docs/security.md":                "TestSecurityPage",
	"docs/why-did-my-pod-restart.md":  "TestDemoPagesCommands",
	"docs/getting-started.md":         "TestDemoPagesCommands",
}

// blocksRunElsewhere are the ```sh blocks of the other pages, by page and
// a text found in exactly one of the page's blocks: where each is run, or
// why it cannot be run by a test.
var blocksRunElsewhere = map[string]map[string]string{
	"README.md": {
		"go run ./cmd/eventsd --demo": "TestTranscripts runs every transcript against eventsd --demo, built once",
		"go test -race ./...":         ".ci/run runs it (as go test -race -json ./...)",
		"helm install eventsd oci://": "test/cluster/helm runs it verbatim on a real node, with a stand-in for ghcr.io",
		"rollout status":              "test/cluster/helm runs it on a real node (port-forward on a free port)",
	},
	"docs/development.md": {
		"go test -race ./...\n":         "the suite itself: .ci/run runs it",
		"internal/testsummary":          ".ci/run runs it, with the summary it prints",
		"-robustness.duration=30m":      "a 30-minute run by hand; test/robustness's own short run is part of the suite",
		"-run TestReferenceDoc -update": "it rewrites the reference pages; each TestReferenceDoc checks them unchanged",
	},
	"docs/libraries.md": {
		"go mod edit -replace": "it edits the reader's own module; TestGoSnippetsCompile builds the page's Go programs against this module",
	},
	"docs/releasing.md": {
		"curl -fsSLO":                 "it downloads a published release from github.com, which this machine cannot reach",
		"kubectl krew install":        "it downloads the krew manifest from github.com; test/release checks the manifest tools/release writes",
		"helm install eventsd oci://": "test/cluster/helm runs it (as the README's) on a real node",
		"kubectl apply -k 'https://":  "kustomize fetches the repository from github.com; test/cluster/kustomize applies the same base from the clone",
		"go install github.com":       "it downloads a published module version",
		"go build -v -o bin/eventsd":  "TestDemoPagesCommands runs the same build (getting-started.md)",
		"sha256sum -c SHA256SUMS\n":   "it checks a downloaded release; test/release checks the checksums tools/release writes",
		"git checkout v0.1.0":         "it needs a release tag; test/release builds twice and compares (reproducibility)",
		"set-version v0.2.0":          "it commits to the repository; test/release runs set-version in a copy",
		"--dry-run":                   "test/release runs the release tool's build and dry run",
		"git tag -a v0.2.0":           "it pushes a tag to github.com",
	},
	"docs/what-happened-to-my-app.md": {
		"go run ./cmd/eventsd --demo": "TestTranscripts runs every transcript against eventsd --demo, built once",
	},
	"docs/search.md": {
		"claude mcp add": "it registers evctl with Claude Code, an assistant this machine does not have; evctl's TestMCPStdio starts evctl mcp as a client does and drives it with the protocol's Go client",
	},
	"docs/which-events-are-loudest.md": {
		"go run ./cmd/eventsd --demo":                    "TestTranscripts runs every transcript against eventsd --demo, built once",
		"get --raw '/apis/events.kubevents.io/v1/facets": "the parameters kubectl cannot send; server/facets_test.go asks them of eventsd, and the page's kubectl get facets transcript is checked against the demo",
	},
	"docs/mirror-a-fleet.md": {
		"eventsd --sources-config fleet-sources.yaml": "test/e2e's TestFleet runs eventsd with a SourcesConfiguration of two real kube-apiservers, on both backends; the page's kubeconfigs name clusters this machine does not have",
		"kubectl --kubeconfig east.kubeconfig":        "test/e2e's TestFleet runs kubectl get events -A with a kubeconfig whose server ends in /clusters/NAME and compares it with the source's",
		"--field-selector cluster!=west":              "server/cluster_test.go's TestFleetServing lists and watches /clusters/*/ with cluster= and cluster!= selectors; TestFleet lists it through client-go",
	},
	"docs/robustness.md": {
		"-robustness.seed=421074":                        "a replay of one seed by hand; the suite runs test/robustness's short run",
		"-robustness.duration=30m -robustness.round=15s": "a 30-minute run by hand",
		"-robustness.duration=5m":                        "runs of minutes by hand",
	},
}

// TestEveryPageBlockAccounted holds every ```sh block of README.md and
// docs/ to be run by a test here or elsewhere, or to say why it is not:
// a page's new block fails until it is.
func TestEveryPageBlockAccounted(t *testing.T) {
	for _, p := range pages(t) {
		if len(doctest.Blocks(p.text, "sh")) == 0 {
			continue
		}
		if _, ok := pageTests[p.name]; ok {
			continue
		}
		notRun, ok := blocksRunElsewhere[p.name]
		if !ok {
			t.Errorf("%s has ```sh blocks that no test runs or accounts for: run them in a page test (pageBlocks), or list each in blocksRunElsewhere with where it runs or why it cannot", p.name)
			continue
		}
		t.Run(strings.ReplaceAll(p.name, "/", "_"), func(t *testing.T) {
			pageBlocks(t, p.name, nil, notRun)
		})
	}
	for name := range blocksRunElsewhere {
		if _, ok := pageTests[name]; ok {
			t.Errorf("%s is in both pageTests and blocksRunElsewhere", name)
		}
	}
}
