package e2e

import (
	"debug/buildinfo"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// versionOf reads p's /version, without a token.
func versionOf(t *testing.T, p *eventsdtest.Process) version.Info {
	t.Helper()
	resp, err := http.Get(p.URL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info version.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /version: %d, %v", resp.StatusCode, err)
	}
	return info
}

// versionFlag runs bin --version and returns what it printed.
func versionFlag(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	return string(out)
}

// buildEventsd builds eventsd from the module at root with extra go
// build flags.
func buildEventsd(t *testing.T, root string, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "eventsd")
	build := exec.Command(buildcache.GoTool(), append(append([]string{"build"}, flags...), "-o", bin, "./cmd/eventsd")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %q: %v\n%s", flags, err, out)
	}
	return bin
}

// TestVersion: eventsd reports its build at /version and for --version:
// what go build stamped (in a git clone: the commit, its time and the tree
// state; go stamps nothing in a git worktree or with -buildvcs=false), and
// with -ldflags -X, values that win. Its gitVersion stays a 1.32 semantic
// version, and kubectl version accepts it.
func TestVersion(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, info version.Info) {
		t.Helper()
		v, err := utilversion.ParseSemantic(info.GitVersion)
		if err != nil || v.Major() != 1 || v.Minor() != 32 || info.Major != "1" || info.Minor != "32" {
			t.Errorf("%s: gitVersion %q (%v), major %q, minor %q: want a 1.32 semantic version", what, info.GitVersion, err, info.Major, info.Minor)
		}
		if info.GoVersion != runtime.Version() || info.Platform != runtime.GOOS+"/"+runtime.GOARCH || info.Compiler != runtime.Compiler {
			t.Errorf("%s: goVersion %q, platform %q, compiler %q: want this toolchain's %s, %s/%s, %s", what, info.GoVersion, info.Platform, info.Compiler,
				runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.Compiler)
		}
	}

	t.Run("stamp", func(t *testing.T) {
		bin := eventsdtest.Binary(t) // go build ./cmd/eventsd, as users build it
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		stamp := map[string]string{}
		for _, s := range bi.Settings {
			stamp[s.Key] = s.Value
		}
		p := eventsdtest.Start(t, eventsdtest.Options{})
		info := versionOf(t, p)
		check("/version", info)
		if commit := stamp["vcs.revision"]; commit == "" {
			t.Logf("go stamped no VCS facts in this build (it stamps none in a git worktree or with -buildvcs=false): /version %+v", info)
			if info.GitCommit != "" || info.GitVersion != "v1.32.0-kubevents" {
				t.Errorf("/version %+v: want no commit without a stamp", info)
			}
		} else {
			tree := map[string]string{"false": "clean", "true": "dirty"}[stamp["vcs.modified"]]
			if info.GitCommit != commit || info.BuildDate != stamp["vcs.time"] || info.GitTreeState != tree || !strings.Contains(info.GitVersion, "+"+commit[:12]) {
				t.Errorf("/version %+v: want the stamp's commit %s (in gitVersion too), time %s and tree %s", info, commit, stamp["vcs.time"], tree)
			}
			if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil && strings.TrimSpace(string(head)) != commit {
				t.Errorf("stamped commit %s, HEAD is %s", commit, head)
			}
		}
		out := versionFlag(t, bin)
		want := "eventsd " + info.GitVersion + " "
		if info.GitCommit != "" {
			want += "gitCommit=" + info.GitCommit + " "
		}
		if !strings.HasPrefix(out, want) || !strings.Contains(out, " goVersion="+info.GoVersion) || !strings.Contains(out, " platform="+info.Platform) {
			t.Errorf("eventsd --version printed %q: want it to start %q, with the Go version and platform", out, want)
		}

		// kubectl version takes it (it parses the server's gitVersion).
		r := kubectlOK(t, p, p.Kubeconfig(), "version", "-o", "json")
		var kv struct{ ServerVersion version.Info }
		if err := json.Unmarshal([]byte(r.Stdout), &kv); err != nil || kv.ServerVersion != info {
			t.Errorf("kubectl version -o json: server %+v (%v), want %+v\n%s", kv.ServerVersion, err, info, r.Stdout)
		}
		if strings.Contains(r.Stderr, "WARNING") {
			t.Errorf("kubectl version warns: %s", r.Stderr)
		}
	})

	t.Run("ldflags", func(t *testing.T) {
		const pkg = "github.com/kubevents/kubevents/internal/buildinfo"
		bin := buildEventsd(t, root, "-ldflags",
			"-X "+pkg+".gitCommit=fedcba9876543210fedcba9876543210fedcba98 -X "+pkg+".gitTreeState=clean -X "+pkg+".buildDate=2030-01-02T03:04:05Z")
		p := eventsdtest.Start(t, eventsdtest.Options{Binary: bin})
		info := versionOf(t, p)
		check("/version", info)
		if info.GitVersion != "v1.32.0-kubevents+fedcba987654" || info.GitCommit != "fedcba9876543210fedcba9876543210fedcba98" ||
			info.GitTreeState != "clean" || info.BuildDate != "2030-01-02T03:04:05Z" {
			t.Errorf("/version %+v: want the -ldflags values", info)
		}
		if out, want := versionFlag(t, bin), "eventsd v1.32.0-kubevents+fedcba987654 gitCommit=fedcba9876543210fedcba9876543210fedcba98 gitTreeState=clean buildDate=2030-01-02T03:04:05Z goVersion="+runtime.Version(); !strings.HasPrefix(out, want) {
			t.Errorf("eventsd --version printed %q, want it to start %q", out, want)
		}
		r := kubectlOK(t, p, p.Kubeconfig(), "version")
		if !strings.Contains(r.Stdout, "Server Version: v1.32.0-kubevents+fedcba987654") {
			t.Errorf("kubectl version:\n%s%s", r.Stdout, r.Stderr)
		}
	})
}
