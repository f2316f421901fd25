package buildinfo

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

func build(settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1"}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

// TestFromBuild: the VCS facts go stamps are read, -ldflags overrides
// win, and the GitVersion stays a semantic version of the same Kubernetes
// level (kubectl compares it), with the commit as build metadata.
func TestFromBuild(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name                                           string
		bi                                             *debug.BuildInfo
		o                                              Overrides
		gitVersion, commit, treeState, date, goVersion string
	}{
		{"no build info", nil, Overrides{}, BaseVersion, "", "", "", runtime.Version()},
		{"no VCS (go run, go test)", build("GOOS", "linux"), Overrides{}, BaseVersion, "", "", "", "go1.99.1"},
		{"clean checkout", build("vcs", "git", "vcs.revision", commit, "vcs.time", "2026-11-20T10:00:00Z", "vcs.modified", "false"), Overrides{},
			BaseVersion + "+0123456789ab", commit, "clean", "2026-11-20T10:00:00Z", "go1.99.1"},
		{"modified tree", build("vcs.revision", commit, "vcs.time", "2026-11-20T10:00:00Z", "vcs.modified", "true"), Overrides{},
			BaseVersion + "+0123456789ab-dirty", commit, "dirty", "2026-11-20T10:00:00Z", "go1.99.1"},
		{"ldflags win", build("vcs.revision", commit, "vcs.time", "2026-11-20T10:00:00Z", "vcs.modified", "true"),
			Overrides{GitCommit: "fedcba9876543210", GitTreeState: "clean", BuildDate: "2027-01-02T03:04:05Z"},
			BaseVersion + "+fedcba987654", "fedcba9876543210", "clean", "2027-01-02T03:04:05Z", "go1.99.1"},
		{"ldflags without VCS", nil, Overrides{GitCommit: "abc123", BuildDate: "2027-01-02T03:04:05Z"},
			BaseVersion + "+abc123", "abc123", "", "2027-01-02T03:04:05Z", runtime.Version()},
		{"a release", build("vcs.revision", commit, "vcs.modified", "false"), Overrides{GitCommit: commit, GitTreeState: "clean", BuildDate: "2027-01-02T03:04:05Z", Release: "v0.1.0-rc.1"},
			BaseVersion + "+v0.1.0-rc.1", commit, "clean", "2027-01-02T03:04:05Z", "go1.99.1"},
		{"a release semver cannot carry", nil, Overrides{GitCommit: "abc123", Release: "v0.1/x"}, BaseVersion + "+abc123", "abc123", "", "", runtime.Version()},
		{"a commit semver cannot carry", nil, Overrides{GitCommit: "v1.2/x"}, BaseVersion, "v1.2/x", "", "", runtime.Version()},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := FromBuild(c.bi, c.o)
			if got.GitVersion != c.gitVersion || got.GitCommit != c.commit || got.GitTreeState != c.treeState ||
				got.BuildDate != c.date || got.GoVersion != c.goVersion {
				t.Errorf("got %+v, want gitVersion %s, commit %q, tree %q, date %q, go %s", got, c.gitVersion, c.commit, c.treeState, c.date, c.goVersion)
			}
			if got.Major != "1" || got.Minor != "32" || got.Platform != runtime.GOOS+"/"+runtime.GOARCH || got.Compiler != runtime.Compiler {
				t.Errorf("major %s, minor %s, platform %s, compiler %s", got.Major, got.Minor, got.Platform, got.Compiler)
			}
			v, err := utilversion.ParseSemantic(got.GitVersion)
			if err != nil {
				t.Fatalf("gitVersion %q is not a semantic version: %v", got.GitVersion, err)
			}
			if v.Major() != 1 || v.Minor() != 32 || v.PreRelease() != "kubevents" {
				t.Errorf("gitVersion %q is %d.%d-%s, want 1.32-kubevents", got.GitVersion, v.Major(), v.Minor(), v.PreRelease())
			}
		})
	}
}

// TestVersionFlag: --version prints the command's name and the build's
// facts, and runs nothing; -v stays free (kubectl's verbosity).
func TestVersionFlag(t *testing.T) {
	ran := false
	cmd := &cobra.Command{Use: "thing", RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
	AddVersionFlag(cmd)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := "thing " + String(Get()) + "\n"
	if ran || out.String() != want {
		t.Errorf("--version printed %q (ran: %v), want %q", out.String(), ran, want)
	}
	if !strings.HasPrefix(out.String(), "thing "+BaseVersion) || !strings.Contains(out.String(), " goVersion="+runtime.Version()) ||
		!strings.Contains(out.String(), " platform="+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("--version printed %q: want the version, Go version and platform", out.String())
	}
	if cmd.Flags().ShorthandLookup("v") != nil {
		t.Error("--version took the shorthand -v")
	}
}

func TestString(t *testing.T) {
	info := FromBuild(build("vcs.revision", "0123456789abcdef", "vcs.time", "2026-11-20T10:00:00Z", "vcs.modified", "false"), Overrides{})
	want := BaseVersion + "+0123456789ab gitCommit=0123456789abcdef gitTreeState=clean buildDate=2026-11-20T10:00:00Z goVersion=go1.99.1 compiler=" +
		runtime.Compiler + " platform=" + runtime.GOOS + "/" + runtime.GOARCH
	if got := String(info); got != want {
		t.Errorf("String: %q, want %q", got, want)
	}
	if got := String(FromBuild(nil, Overrides{})); strings.Contains(got, "gitCommit") || strings.Contains(got, "buildDate") {
		t.Errorf("String without VCS facts: %q, want them left out", got)
	}
}
