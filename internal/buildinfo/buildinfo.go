// Package buildinfo says which build a binary is: the version eventsd
// serves at /version and every command prints for --version.
//
// The facts come from the build itself (runtime/debug.ReadBuildInfo: the
// VCS revision, its time and whether the tree was modified, which `go
// build` stamps in a git checkout, and the Go version), and from
// variables a release build may set with -ldflags, which win:
//
//	go build -ldflags "-X github.com/kubevents/kubevents/internal/buildinfo.gitCommit=$(git rev-parse HEAD)
//	  -X github.com/kubevents/kubevents/internal/buildinfo.gitTreeState=clean
//	  -X github.com/kubevents/kubevents/internal/buildinfo.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)
//	  -X github.com/kubevents/kubevents/internal/buildinfo.release=v0.1.0" ./cmd/eventsd
//
// A release build (tools/release) sets all four; release is the release's
// version, which then takes the commit's place as the GitVersion's build
// metadata (v1.32.0-kubevents+v0.1.0).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/version"
)

// Set with -ldflags -X at build time; empty unless set. They are not
// state: nothing changes them at run time.
var (
	gitCommit    string
	gitTreeState string
	buildDate    string
	release      string
)

// The Kubernetes API level whose Events API eventsd implements: clients
// check it (kubectl version, client-go's discovery), so it stays a
// Kubernetes version.
const (
	major = "1"
	minor = "32"
	// BaseVersion is the semantic version every build's GitVersion
	// starts with; a build whose commit is known adds it as build
	// metadata (v1.32.0-kubevents+0123456789ab, with -dirty when the tree
	// was modified), which semantic versions, and so kubectl, ignore in
	// comparisons.
	BaseVersion = "v" + major + "." + minor + ".0-kubevents"
)

// Overrides are facts given at build time (the -ldflags variables); each
// one set wins over the build's own.
type Overrides struct {
	GitCommit, GitTreeState, BuildDate string
	// Release is the release's version (v0.1.0); empty for a build that
	// is not a release.
	Release string
}

// Get returns this binary's version.
func Get() version.Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuild(bi, Overrides{GitCommit: gitCommit, GitTreeState: gitTreeState, BuildDate: buildDate, Release: release})
}

// FromBuild makes the version of a build from its build information (nil
// when the binary has none) and the overrides.
func FromBuild(bi *debug.BuildInfo, o Overrides) version.Info {
	info := version.Info{
		Major:     major,
		Minor:     minor,
		GoVersion: runtime.Version(),
		Compiler:  runtime.Compiler,
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.GitCommit = s.Value
			case "vcs.time":
				info.BuildDate = s.Value
			case "vcs.modified":
				info.GitTreeState = "clean"
				if s.Value == "true" {
					info.GitTreeState = "dirty"
				}
			}
		}
	}
	for _, v := range []struct {
		to   *string
		from string
	}{
		{&info.GitCommit, o.GitCommit}, {&info.GitTreeState, o.GitTreeState}, {&info.BuildDate, o.BuildDate},
	} {
		if v.from != "" {
			*v.to = v.from
		}
	}
	info.GitVersion = gitVersion(info.GitCommit, info.GitTreeState)
	if o.Release != "" && validMetadata(o.Release) {
		info.GitVersion = BaseVersion + "+" + o.Release
	}
	return info
}

// validMetadata reports whether s can be a semantic version's build
// metadata: dot-separated, non-empty identifiers of [0-9A-Za-z-].
func validMetadata(s string) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" || strings.IndexFunc(id, func(r rune) bool {
			return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-')
		}) >= 0 {
			return false
		}
	}
	return true
}

// gitVersion is BaseVersion with the commit as build metadata, when known
// and made of what semantic versions allow there.
func gitVersion(commit, treeState string) string {
	if !validMetadata(commit) {
		return BaseVersion
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	v := BaseVersion + "+" + commit
	if treeState == "dirty" {
		v += "-dirty"
	}
	return v
}

// String renders info on one line, as --version prints it after the
// command's name; facts the build does not have are left out.
func String(info version.Info) string {
	var b strings.Builder
	b.WriteString(info.GitVersion)
	for _, f := range []struct{ key, value string }{
		{"gitCommit", info.GitCommit}, {"gitTreeState", info.GitTreeState}, {"buildDate", info.BuildDate},
		{"goVersion", info.GoVersion}, {"compiler", info.Compiler}, {"platform", info.Platform},
	} {
		if f.value != "" {
			fmt.Fprintf(&b, " %s=%s", f.key, f.value)
		}
	}
	return b.String()
}

// AddVersionFlag gives cmd a --version flag printing "NAME VERSION" and
// this binary's build facts (String of Get) to its output, then exiting.
// It has no shorthand: -v is kubectl's verbosity.
func AddVersionFlag(cmd *cobra.Command) {
	cmd.Version = String(Get())
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	cmd.Flags().Bool("version", false, "Print the version and build (commit, tree state, date, Go version, platform) and exit.")
}
