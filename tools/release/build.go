package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// buildinfoPkg takes the build's facts with -X.
const buildinfoPkg = "github.com/kubevents/kubevents/internal/buildinfo"

// chartDir is the chart, relative to the repository root.
var chartDir = filepath.Join("deploy", "helm", "eventsd")

// Options configure a release build.
type Options struct {
	// Version is the release's version, a semantic version with a
	// leading v: the git tag.
	Version string
	// Source is the repository root.
	Source string
	// Out is the directory the artifacts are written to; it must be
	// empty or absent, so that nothing of an earlier build is published
	// with this one.
	Out string
	// Platforms are the os/arch pairs of the archives; the linux ones are
	// the image's.
	Platforms []string
	// Commands are the commands, under cmd/, in each archive.
	Commands []string
	// Image and Chart choose whether the image is built and the chart
	// packaged.
	Image, Chart bool
	// DownloadURL is where the release's files are downloaded from,
	// followed by /<version>/<file>: the krew manifest's archives.
	DownloadURL string
	// Helm is the helm binary; empty: the one on PATH, else
	// internal/helmbin's build.
	Helm string
	// AllowDirty builds from a tree with uncommitted changes.
	AllowDirty bool
	// DryRun checks and prints what would run, building nothing.
	DryRun bool
	// Log receives the commands run and the summary.
	Log io.Writer
}

// DefaultOptions are a full release's options, without the version.
func DefaultOptions() Options {
	return Options{
		Out:         "dist",
		Platforms:   []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"},
		Commands:    []string{"eventsd", "evctl", "nodeagent", "fakecri"},
		Image:       true,
		Chart:       true,
		DownloadURL: "https://github.com/kubevents/kubevents/releases/download",
		Log:         io.Discard,
	}
}

// versionRE is a semantic version with a leading v and no build metadata
// (an image tag cannot hold "+").
var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// checkVersion refuses what is not a release version.
func checkVersion(v string) error {
	if v == "" {
		return errors.New("--version is required: the release's version, the git tag (v0.1.0)")
	}
	if !versionRE.MatchString(v) {
		return fmt.Errorf("version %q: want a semantic version with a leading v and no build metadata, such as v0.1.0 or v0.2.0-rc.1", v)
	}
	return nil
}

// platform is one os/arch pair.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

func parsePlatforms(ss []string) ([]platform, error) {
	if len(ss) == 0 {
		return nil, errors.New("--platforms: none given")
	}
	var ps []platform
	for _, s := range ss {
		os, arch, ok := strings.Cut(s, "/")
		if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("--platforms: %q is not os/arch (linux/amd64)", s)
		}
		if os == "windows" {
			return nil, fmt.Errorf("--platforms: %q: windows is not a release platform", s)
		}
		p := platform{os, arch}
		if slices.Contains(ps, p) {
			return nil, fmt.Errorf("--platforms: %q given twice", s)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// source is what the checkout says of the build.
type source struct {
	commit, treeState string
	// epoch is the time of every file in the artifacts: the commit's, or
	// SOURCE_DATE_EPOCH.
	epoch time.Time
}

// gitSource reads the commit, whether the tree has uncommitted changes
// and the commit's time; SOURCE_DATE_EPOCH overrides the time.
func gitSource(root string) (source, error) {
	out := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s in %s (a release is built from a git checkout): %w", strings.Join(args, " "), root, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var s source
	var err error
	if s.commit, err = out("rev-parse", "HEAD"); err != nil {
		return s, err
	}
	changes, err := out("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return s, err
	}
	s.treeState = "clean"
	if changes != "" {
		s.treeState = "dirty"
	}
	t, err := out("log", "-1", "--format=%ct")
	if err != nil {
		return s, err
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		t = v
	}
	sec, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return s, fmt.Errorf("the build's time %q (SOURCE_DATE_EPOCH or the commit's): %w", t, err)
	}
	s.epoch = time.Unix(sec, 0).UTC()
	return s, nil
}

// builder runs one release build.
type builder struct {
	o     Options
	src   source
	plats []platform
}

// Build makes the release's artifacts in o.Out (see the package comment),
// or with o.DryRun checks and prints what it would run.
func Build(o Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := checkVersion(o.Version); err != nil {
		return err
	}
	plats, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	if o.Image && len(linux(plats)) == 0 {
		return errors.New("--image: no linux platform in --platforms to build the image for (or give --image=false)")
	}
	if len(o.Commands) == 0 {
		return errors.New("--commands: none given")
	}
	for _, c := range o.Commands {
		if _, err := os.Stat(filepath.Join(o.Source, "cmd", c, "main.go")); err != nil {
			return fmt.Errorf("--commands: %q is not a command under cmd/: %w", c, err)
		}
	}
	src, err := gitSource(o.Source)
	if err != nil {
		return err
	}
	if src.treeState == "dirty" && !o.AllowDirty {
		return fmt.Errorf("the checkout at %s has uncommitted changes: a release is built from its commit alone (commit or stash them; --allow-dirty to try the build anyway)", o.Source)
	}
	if err := checkOut(o.Out); err != nil {
		return err
	}
	b := &builder{o: o, src: src, plats: plats}
	if err := b.resolve(); err != nil {
		return err
	}
	if o.DryRun {
		fmt.Fprintf(o.Log, "dry run: version %s, commit %s (%s), every command resolves for %v; the build would run:\n", o.Version, src.commit, src.treeState, plats)
	} else if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kubevents-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, p := range plats {
		if err := b.binaries(p, filepath.Join(tmp, p.os+"_"+p.arch)); err != nil {
			return err
		}
	}
	if slices.Contains(o.Commands, "evctl") {
		fmt.Fprintf(o.Log, "write %s\n", filepath.Join(o.Out, krewFile))
		if !o.DryRun {
			if err := writeKrewManifest(o.Out, o.DownloadURL, o.Version, plats); err != nil {
				return fmt.Errorf("the krew manifest: %w", err)
			}
		}
	}
	if o.Image {
		if err := b.image(); err != nil {
			return err
		}
	}
	if o.Chart {
		if err := b.chart(); err != nil {
			return err
		}
	}
	if o.DryRun {
		fmt.Fprintf(o.Log, "write %s\n", filepath.Join(o.Out, sumsFile))
		return nil
	}
	sums, err := writeSums(o.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "\nrelease %s in %s:\n%s", o.Version, o.Out, sums)
	return nil
}

// checkOut refuses an output directory holding anything.
func checkOut(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--out %s holds %s and more from an earlier build: remove it, or give another directory, so that only this release's files are published", dir, entries[0].Name())
	}
	return nil
}

// goEnv is the environment of a go command building for p: static, for
// p's os and arch, whatever the caller's environment says.
func goEnv(p platform) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, k := range []string{"CGO_ENABLED=", "GOOS=", "GOARCH=", "GOARM=", "GOAMD64=", "GOARM64="} {
			if strings.HasPrefix(kv, k) {
				return true
			}
		}
		return false
	})
	return append(env, "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch)
}

// packages are the commands' import paths, relative to the root.
func (b *builder) packages() []string {
	var pkgs []string
	for _, c := range b.o.Commands {
		pkgs = append(pkgs, "./cmd/"+c)
	}
	return pkgs
}

// resolve checks that every command and its dependencies resolve for
// every platform (build constraints, imports), before minutes of builds:
// go list, which reads the sources and compiles nothing.
func (b *builder) resolve() error {
	// go list does not refuse a pair the toolchain cannot build for.
	dist, err := exec.Command("go", "tool", "dist", "list").Output()
	if err != nil {
		return fmt.Errorf("go tool dist list: %w", err)
	}
	known := strings.Fields(string(dist))
	for _, p := range b.plats {
		if !slices.Contains(known, p.String()) {
			return fmt.Errorf("--platforms: the Go toolchain cannot build for %s (go tool dist list)", p)
		}
	}
	for _, p := range b.plats {
		args := append([]string{"list", "-e", "-deps", "-f", "{{with .Error}}{{.}}\n{{end}}{{range .DepsErrors}}{{.}}\n{{end}}"}, b.packages()...)
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = b.o.Source, goEnv(p)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			return fmt.Errorf("the commands do not resolve for %s (go list -deps %s): %v\n%s", p, strings.Join(b.packages(), " "), err, out)
		}
	}
	return nil
}

// run prints a command and runs it in dir, unless dry-running; its output
// goes to the log, or with its failure into the error.
func (b *builder) run(dir string, env []string, name string, args ...string) error {
	fmt.Fprintf(b.o.Log, "+ %s %s\n", name, strings.Join(quote(args), " "))
	if b.o.DryRun {
		return nil
	}
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(quote(args), " "), err, out)
	}
	// What the image's build says of it (its name and digest), helm's
	// package and lint results.
	_, err = b.o.Log.Write(out)
	return err
}

// quote quotes the arguments a shell would split.
func quote(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"$\\{}") {
			q[i] = strconv.Quote(a)
		}
	}
	return q
}

// ldflags stamp the build's facts in internal/buildinfo, and leave out
// the build id and symbol tables.
func (b *builder) ldflags() string {
	return strings.Join([]string{"-s", "-w", "-buildid=",
		"-X", buildinfoPkg + ".gitCommit=" + b.src.commit,
		"-X", buildinfoPkg + ".gitTreeState=" + b.src.treeState,
		"-X", buildinfoPkg + ".buildDate=" + b.src.epoch.Format(time.RFC3339),
		"-X", buildinfoPkg + ".release=" + b.o.Version,
	}, " ")
}

// archiveName is the archive of platform p: krew's and most release
// tools' form, one per platform.
func archiveName(version string, p platform) string {
	return fmt.Sprintf("kubevents_%s_%s_%s.tar.gz", version, p.os, p.arch)
}

// binaries builds the commands for p into dir and archives them.
func (b *builder) binaries(p platform, dir string) error {
	args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags", b.ldflags(), "-o", dir + string(os.PathSeparator)}, b.packages()...)
	fmt.Fprintf(b.o.Log, "# %s\n", p)
	if err := b.run(b.o.Source, goEnv(p), "go", args...); err != nil {
		return err
	}
	out := filepath.Join(b.o.Out, archiveName(b.o.Version, p))
	var files []archiveFile
	for _, c := range b.o.Commands {
		files = append(files, archiveFile{name: c, path: filepath.Join(dir, c), mode: 0o755})
	}
	files = append(files, archiveFile{name: "LICENSE", path: filepath.Join(b.o.Source, "LICENSE"), mode: 0o644})
	fmt.Fprintf(b.o.Log, "write %s (%s)\n", out, strings.Join(names(files), " "))
	if b.o.DryRun {
		return nil
	}
	return writeArchive(out, files, b.src.epoch)
}

// image builds the image for the linux platforms with tools/image, named
// with the chart's repository and the version, its binaries stamped as
// the archives'.
func (b *builder) image() error {
	plats := strings.Join(linux(b.plats), ",")
	fmt.Fprintf(b.o.Log, "# the image for %s\n", plats)
	env := append(os.Environ(), "SOURCE_DATE_EPOCH="+strconv.FormatInt(b.src.epoch.Unix(), 10))
	return b.run(b.o.Source, env, "go", "run", "-C", filepath.Join(b.o.Source, "tools", "image"), ".",
		"--source", b.o.Source,
		"--platform", plats,
		"--tag", b.o.Version, "--release", b.o.Version,
		"--output", filepath.Join(b.o.Out, imageFile))
}

// linux are the linux platforms of plats, the image's.
func linux(plats []platform) []string {
	var l []string
	for _, p := range plats {
		if p.os == "linux" {
			l = append(l, p.String())
		}
	}
	return l
}

// imageFile is the image's archive in the output directory.
const imageFile = "eventsd-image.tar"

// chart packages the chart with the release's version (without the v, as
// charts are versioned) and appVersion (the image tag the chart installs
// by default), then lints the package.
func (b *builder) chart() error {
	helm, err := b.helm()
	if err != nil {
		return err
	}
	fmt.Fprintf(b.o.Log, "# the chart\n")
	chartVersion := strings.TrimPrefix(b.o.Version, "v")
	if err := b.run(b.o.Source, nil, helm, "package", filepath.Join(b.o.Source, chartDir),
		"--version", chartVersion, "--app-version", b.o.Version, "--destination", b.o.Out); err != nil {
		return err
	}
	return b.run(b.o.Source, nil, helm, "lint", "--strict", filepath.Join(b.o.Out, "eventsd-"+chartVersion+".tgz"))
}

// helm is the helm to run: --helm, else what internal/helmbin finds (the
// helm on PATH, else its build from tools/helm).
func (b *builder) helm() (string, error) {
	if b.o.Helm != "" {
		return b.o.Helm, nil
	}
	if b.o.DryRun {
		return "helm", nil
	}
	fmt.Fprintf(b.o.Log, "# helm: on PATH, else built once from tools/helm (minutes the first time)\n+ go run ./internal/helmbin/buildhelm\n")
	cmd := exec.Command("go", "run", "./internal/helmbin/buildhelm")
	cmd.Dir = b.o.Source
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding helm (go run ./internal/helmbin/buildhelm; or give --helm): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
