// Command release builds a release of kubevents from a version (the git
// tag, v0.1.0) into a directory of artifacts, and sets a version in the
// files a release's checkout must name. Run from the repository root:
//
//	go run -C tools/release . --version v0.1.0 --out dist/
//	go run -C tools/release . set-version v0.1.0
//
// The build writes, in --out (which must be empty or absent):
//
//   - kubevents_<version>_<os>_<arch>.tar.gz for linux and darwin on
//     amd64 and arm64: eventsd, evctl, nodeagent and fakecri, static
//     (CGO_ENABLED=0), -trimpath, stamped through internal/buildinfo's
//     -ldflags -X variables (commit, tree state, commit time, release),
//     with LICENSE; reproducible (every time in them is the commit's, or
//     SOURCE_DATE_EPOCH);
//   - eventsd-image.tar, the image for linux/amd64 and linux/arm64 as an
//     OCI archive, named <chart's image.repository>:<version>
//     (ghcr.io/kubevents/eventsd:v0.1.0), built by tools/image;
//   - eventsd-<version without v>.tgz, the chart packaged with `helm
//     package`, its version and appVersion the release's (the appVersion is
//     the image tag it installs), and linted;
//   - evctl.krew.yaml, evctl's krew plugin manifest (kubectl evctl) over
//     the archives on the GitHub release (--download-url);
//   - SHA256SUMS, the checksums of all of them, as sha256sum -c reads.
//
// Before the long builds it checks that every command resolves for every
// platform (go list -deps with GOOS and GOARCH); --dry-run stops after
// that check and prints what it would run. set-version writes the version
// into deploy/helm/eventsd/Chart.yaml (version, appVersion) and the
// kustomize bases' image, the commit a release's tag points at; the
// release workflow checks that it changes nothing. It is its own module,
// with no dependency beyond Go's standard library: helm is the one on
// PATH or internal/helmbin's build (--helm to give one), the image is
// tools/image's. See docs/releasing.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "set-version" {
		return runSetVersion(args[1:], stdout)
	}
	fset := flag.NewFlagSet("release", flag.ContinueOnError)
	o := DefaultOptions()
	fset.StringVar(&o.Version, "version", "", "The release's version, a semantic version with a leading v (v0.1.0, v0.2.0-rc.1): the git tag. Required.")
	fset.StringVar(&o.Out, "out", o.Out, "The directory to write the artifacts to, empty or absent; a relative path is relative to the repository root.")
	fset.StringVar(&o.Source, "source", "", "The repository root (default: the git checkout holding the working directory).")
	platforms := fset.String("platforms", strings.Join(o.Platforms, ","), "Comma-separated os/arch pairs to build binaries for; the linux ones are the image's.")
	commands := fset.String("commands", strings.Join(o.Commands, ","), "Comma-separated commands (under cmd/) in each archive.")
	fset.BoolVar(&o.Image, "image", o.Image, "Build the image (for the linux platforms).")
	fset.BoolVar(&o.Chart, "chart", o.Chart, "Package and lint the chart.")
	fset.StringVar(&o.DownloadURL, "download-url", o.DownloadURL, "Where the release's files are downloaded from, followed by /<version>/<file> (the krew manifest's archives).")
	fset.StringVar(&o.Helm, "helm", "", "The helm binary (default: helm on PATH, else internal/helmbin's build, which a first time takes minutes).")
	fset.BoolVar(&o.AllowDirty, "allow-dirty", false, "Build from a tree with uncommitted changes (its binaries say gitTreeState=dirty); for trying the build, never for a release.")
	fset.BoolVar(&o.DryRun, "dry-run", false, "Check the version, the output directory and that every command resolves for every platform, print what the build would run, and build nothing.")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (the subcommand is set-version)", fset.Args())
	}
	o.Platforms = splitList(*platforms)
	o.Commands = splitList(*commands)
	o.Log = stdout
	if o.Source == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		o.Source = root
	}
	if !filepath.IsAbs(o.Out) {
		o.Out = filepath.Join(o.Source, o.Out)
	}
	return Build(o)
}

// splitList splits a comma-separated flag, dropping empty elements.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// repoRoot is the top of the git checkout holding the working directory
// (go run -C tools/release runs in tools/release).
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository root with git (give --source): %w", err)
	}
	root := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(root, "cmd", "eventsd")); err != nil {
		return "", errors.New("the git checkout at " + root + " has no cmd/eventsd: give --source")
	}
	return root, nil
}
