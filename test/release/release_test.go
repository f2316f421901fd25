// Package release_test checks the release build (tools/release) and that
// the image is named the same from build to chart.
//
// The release build is run for real on the host platform only, for evctl
// alone (one static build, which after .ci/run's image build, with the
// same compiler flags, is little more than a link), twice, with the
// chart when helm is built: the archive's layout, its reproducibility, the
// stamped version, SHA256SUMS, and the packaged chart's version, image and
// lint. The other platforms and commands are checked with the tool's
// --dry-run, which resolves every command for every platform with go list
// (build constraints and imports, nothing compiled): four platforms' full
// builds would take most of the suite's budget on two cores, and the
// release workflow builds them all anyway before anything is published.
package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/helmbin"
)

// repo is the repository root.
func repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var tool struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// releaseTool is tools/release, built once per test binary.
func releaseTool(t *testing.T) string {
	t.Helper()
	tool.once.Do(func() {
		tool.dir, tool.err = os.MkdirTemp("", "release-tool-")
		if tool.err != nil {
			return
		}
		tool.path = filepath.Join(tool.dir, "release")
		cmd := exec.Command(buildcache.GoTool(), "build", "-o", tool.path, ".")
		cmd.Dir = filepath.Join(repo(), "tools", "release")
		if out, err := cmd.CombinedOutput(); err != nil {
			tool.err = fmt.Errorf("building tools/release: %w\n%s", err, out)
		}
	})
	if tool.err != nil {
		t.Fatal(tool.err)
	}
	return tool.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tool.dir != "" {
		os.RemoveAll(tool.dir)
	}
	os.Exit(code)
}

// runRelease runs the release tool in the repository with args and the
// environment's additions env; it returns the output and the error.
func runRelease(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, releaseTool(t), args...)
	cmd.Dir = filepath.Join(repo(), "tools", "release")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// headCommit is the commit checked out.
func headCommit(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repo(), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (the release build needs one): %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestBuild: a release build on the host platform for evctl: the archive
// holds evctl and LICENSE at its top, owned by root with the build's time,
// evctl is static and says which release and commit it is, SHA256SUMS
// checks every file, a second build gives the same archive byte for
// byte, and the chart (when helm is built) is packaged with the
// release's version, installs the release's image and lints clean.
func TestBuild(t *testing.T) {
	const version = "v0.0.1-test.1"
	commit := headCommit(t)
	host := runtime.GOOS + "/" + runtime.GOARCH
	archive := fmt.Sprintf("kubevents_%s_%s_%s.tar.gz", version, runtime.GOOS, runtime.GOARCH)
	const epoch = 1700000000
	withChart := helmbin.Cached()
	build := func(out string) {
		t.Helper()
		args := []string{"--version", version, "--out", out, "--platforms", host, "--commands", "evctl", "--image=false", "--allow-dirty"}
		if withChart {
			args = append(args, "--helm", helmbin.ForTest(t))
		} else {
			args = append(args, "--chart=false")
		}
		if log, err := runRelease(t, []string{fmt.Sprintf("SOURCE_DATE_EPOCH=%d", epoch)}, args...); err != nil {
			t.Fatalf("release %v: %v\n%s", args, err, log)
		}
	}
	out := filepath.Join(t.TempDir(), "dist")
	build(out)

	want := []string{"SHA256SUMS", archive, "evctl.krew.yaml"}
	if withChart {
		want = append(want, "eventsd-0.0.1-test.1.tgz")
	}
	slices.Sort(want)
	if got := dirNames(t, out); !slices.Equal(got, want) {
		t.Errorf("the release holds %v, want %v", got, want)
	}
	checkSums(t, out)

	files := readArchive(t, filepath.Join(out, archive))
	var names []string
	for _, f := range files {
		names = append(names, f.hdr.Name)
		if f.hdr.Uid != 0 || f.hdr.Gid != 0 || f.hdr.ModTime.Unix() != epoch || f.hdr.Typeflag != tar.TypeReg {
			t.Errorf("%s: owner %d:%d, time %v, type %c; want root's regular file at SOURCE_DATE_EPOCH", f.hdr.Name, f.hdr.Uid, f.hdr.Gid, f.hdr.ModTime, f.hdr.Typeflag)
		}
	}
	if !slices.Equal(names, []string{"evctl", "LICENSE"}) {
		t.Fatalf("the archive holds %v, want evctl and LICENSE at its top", names)
	}
	if files[0].hdr.Mode != 0o755 || files[1].hdr.Mode != 0o644 {
		t.Errorf("modes %o, %o; want 755 for evctl, 644 for LICENSE", files[0].hdr.Mode, files[1].hdr.Mode)
	}
	license, err := os.ReadFile(filepath.Join(repo(), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files[1].body, license) {
		t.Error("the archive's LICENSE is not the repository's")
	}
	evctl := filepath.Join(t.TempDir(), "evctl")
	if err := os.WriteFile(evctl, files[0].body, 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := exec.Command(evctl, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("evctl --version: %v\n%s", err, v)
	}
	for _, w := range []string{"v1.32.0-kubevents+" + version, "gitCommit=" + commit, "buildDate=" + time.Unix(epoch, 0).UTC().Format(time.RFC3339), "platform=" + host} {
		if !strings.Contains(string(v), w) {
			t.Errorf("evctl --version printed %q, want %q in it", v, w)
		}
	}
	if runtime.GOOS == "linux" {
		f, err := elf.Open(evctl)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("evctl has a program interpreter: not static")
			}
		}
		f.Close()
	}

	checkKrew(t, filepath.Join(out, "evctl.krew.yaml"), version, archive, fileHash(t, filepath.Join(out, archive)))

	again := filepath.Join(t.TempDir(), "dist")
	build(again)
	if a, b := fileHash(t, filepath.Join(out, archive)), fileHash(t, filepath.Join(again, archive)); a != b {
		t.Errorf("two builds of the same commit gave archives %s and %s", a, b)
	}

	t.Run("chart", func(t *testing.T) {
		if !withChart {
			t.Skip("helm is not built yet (go run ./internal/helmbin/buildhelm; .ci/run does): the chart was not packaged")
		}
		pkg := filepath.Join(out, "eventsd-0.0.1-test.1.tgz")
		show := helm(t, "show", "chart", pkg)
		for _, w := range []string{"\nversion: 0.0.1-test.1\n", "\nappVersion: " + version + "\n"} {
			if !strings.Contains("\n"+show, w) {
				t.Errorf("helm show chart: want %q in\n%s", strings.TrimSpace(w), show)
			}
		}
		if lint := helm(t, "lint", "--strict", pkg); !strings.Contains(lint, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm lint --strict %s:\n%s", filepath.Base(pkg), lint)
		}
		if imgs := eventsdImages(t, []byte(helm(t, "template", "eventsd", pkg))); !slices.Equal(imgs, []string{"ghcr.io/kubevents/eventsd:" + version}) {
			t.Errorf("the packaged chart runs %v, want the release's image", imgs)
		}
	})
}

// checkKrew checks evctl's krew manifest: the plugin evctl at the
// version, for the host platform, from the archive on the GitHub release
// with its checksum.
func checkKrew(t *testing.T, path, version, archive, sum string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
				Bin string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("evctl.krew.yaml: %v\n%s", err, b)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "evctl" || m.Spec.Version != version || len(m.Spec.Platforms) != 1 {
		t.Fatalf("evctl.krew.yaml is not evctl's plugin at %s for one platform:\n%s", version, b)
	}
	p := m.Spec.Platforms[0]
	if p.Selector.MatchLabels["os"] != runtime.GOOS || p.Selector.MatchLabels["arch"] != runtime.GOARCH ||
		p.URI != "https://github.com/kubevents/kubevents/releases/download/"+version+"/"+archive || p.SHA256 != sum ||
		p.Bin != "evctl" || len(p.Files) != 2 || p.Files[0].From != "evctl" {
		t.Errorf("evctl.krew.yaml's platform is not the archive %s (sha256 %s) with evctl:\n%s", archive, sum, b)
	}
}

// TestDryRun: the full release (every platform and command, the image,
// the chart) resolves for every platform, and says what it would build,
// writing nothing.
func TestDryRun(t *testing.T) {
	headCommit(t)
	out := filepath.Join(t.TempDir(), "dist")
	log, err := runRelease(t, nil, "--version", "v1.2.3", "--out", out, "--dry-run", "--allow-dirty")
	if err != nil {
		t.Fatalf("release --dry-run: %v\n%s", err, log)
	}
	for _, p := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		w := fmt.Sprintf("write %s (eventsd evctl nodeagent fakecri LICENSE)", filepath.Join(out, "kubevents_v1.2.3_"+p+".tar.gz"))
		if !strings.Contains(log, w) {
			t.Errorf("the dry run does not say %q:\n%s", w, log)
		}
	}
	for _, w := range []string{
		"-X github.com/kubevents/kubevents/internal/buildinfo.release=v1.2.3",
		"--platform linux/amd64,linux/arm64 --tag v1.2.3 --release v1.2.3",
		"package " + filepath.Join(repo(), "deploy", "helm", "eventsd") + " --version 1.2.3 --app-version v1.2.3",
		"lint --strict " + filepath.Join(out, "eventsd-1.2.3.tgz"),
		"write " + filepath.Join(out, "evctl.krew.yaml"),
	} {
		if !strings.Contains(log, w) {
			t.Errorf("the dry run does not say %q:\n%s", w, log)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dry run made %s: %v", out, err)
	}
}

// TestRefused: what cannot be a release is refused before anything is
// built, saying why.
func TestRefused(t *testing.T) {
	headCommit(t)
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "old.tar.gz"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", t.TempDir()}, "--version is required"},
		{[]string{"--version", "0.1.0"}, "leading v"},
		{[]string{"--version", "v0.1.0+build.1"}, "no build metadata"},
		{[]string{"--version", "v0.1.0", "--out", full}, "holds old.tar.gz"},
		{[]string{"--version", "v0.1.0", "--platforms", "windows/amd64"}, "windows is not a release platform"},
		{[]string{"--version", "v0.1.0", "--platforms", "linux/nosucharch"}, "the Go toolchain cannot build for linux/nosucharch"},
		{[]string{"--version", "v0.1.0", "--commands", "nosuch"}, `"nosuch" is not a command under cmd/`},
		{[]string{"--version", "v0.1.0", "--platforms", "darwin/arm64"}, "no linux platform"},
		{[]string{"set-version", "0.1"}, "leading v"},
	} {
		args := append(c.args, "--allow-dirty")
		if c.args[0] == "set-version" {
			args = c.args
		} else if !slices.Contains(args, "--out") {
			args = append(args, "--out", filepath.Join(t.TempDir(), "dist"))
		}
		log, err := runRelease(t, nil, args...)
		if err == nil || !strings.Contains(log, c.want) {
			t.Errorf("release %v: %v, %s; want a failure saying %q", args, err, log, c.want)
		}
	}
}

// TestUnresolved: a command that does not build for a platform (here, a
// module whose command is for linux only) is found before any build.
func TestUnresolved(t *testing.T) {
	src := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":        "module example.com/linuxonly\n\ngo 1.22\n",
		"LICENSE":       "none\n",
		"cmd/x/main.go": "//go:build linux\n\npackage main\n\nfunc main() {}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", src}, args...)...).CombinedOutput(); err != nil {
			t.Skipf("git %v: %v\n%s", args, err, out)
		}
	}
	args := []string{"--source", src, "--version", "v0.1.0", "--out", filepath.Join(t.TempDir(), "dist"), "--commands", "x", "--image=false", "--chart=false", "--dry-run"}
	if log, err := runRelease(t, nil, append(args, "--platforms", "linux/amd64")...); err != nil {
		t.Fatalf("release for linux: %v\n%s", err, log)
	}
	log, err := runRelease(t, nil, append(args, "--platforms", "linux/amd64,darwin/arm64")...)
	if err == nil || !strings.Contains(log, "do not resolve for darwin/arm64") || !strings.Contains(log, "build constraints exclude all Go files") {
		t.Errorf("release for darwin: %v, %s; want a failure saying the command does not resolve for darwin/arm64", err, log)
	}
}

// TestSetVersion: set-version writes the version into the chart and the
// kustomize bases of a copy of deploy/, once, after which the image built
// by default, the chart's and the bases' agree on it.
func TestSetVersion(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join(repo(), "deploy"), filepath.Join(root, "deploy"))
	out, err := runRelease(t, nil, "set-version", "--source", root, "v9.8.7")
	if err != nil {
		t.Fatalf("set-version: %v\n%s", err, out)
	}
	for _, f := range []string{"deploy/helm/eventsd/Chart.yaml", "deploy/kustomize/mirror/statefulset.yaml", "deploy/kustomize/replicas/deployment.yaml"} {
		if !strings.Contains(out, "\n  "+f) {
			t.Errorf("set-version does not say it changed %s:\n%s", f, out)
		}
	}
	chart, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "eventsd", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chart), "\nversion: 9.8.7\n") || !strings.Contains(string(chart), "\nappVersion: \"v9.8.7\"\n") {
		t.Errorf("Chart.yaml after set-version:\n%s", chart)
	}
	if out, err := runRelease(t, nil, "set-version", "--source", root, "v9.8.7"); err != nil || !strings.Contains(out, "already") {
		t.Errorf("set-version a second time: %v, %s; want nothing changed", err, out)
	}
	checkDefaultImage(t, root, "ghcr.io/kubevents/eventsd:v9.8.7")
}

// TestDefaultImage: the image `go run -C tools/image .` names by
// default is the one the chart installs by default and the kustomize
// bases run, the release's (ghcr.io/kubevents/eventsd:<appVersion>): the
// plain build, imported on a node, is what the plain install runs.
func TestDefaultImage(t *testing.T) {
	checkDefaultImage(t, repo(), "")
}

// TestImageTag: tools/image's --tag names the image with the chart's
// repository (what a release gives it), and refuses a --name beside it.
func TestImageTag(t *testing.T) {
	run := func(args ...string) (string, error) {
		cmd := exec.Command(buildcache.GoTool(), append([]string{"run", "-C", filepath.Join(repo(), "tools", "image"), ".", "--print-name"}, args...)...)
		b, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	if out, err := run("--tag", "v1.2.3"); err != nil || out != "ghcr.io/kubevents/eventsd:v1.2.3" {
		t.Errorf("tools/image --tag v1.2.3 names %q (%v), want ghcr.io/kubevents/eventsd:v1.2.3", out, err)
	}
	if out, err := run("--tag", "v1.2.3", "--name", "x/y:z"); err == nil || !strings.Contains(out, "give --name or --tag, not both") {
		t.Errorf("tools/image --tag --name: %v, %s; want a refusal", err, out)
	}
}

// checkDefaultImage checks that tools/image's default name for the tree
// at root, the image of its kustomize bases and of its chart's default
// render are one, want when given.
func checkDefaultImage(t *testing.T, root, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildcache.GoTool(), "run", "-C", filepath.Join(repo(), "tools", "image"), ".", "--source", root, "--print-name")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run -C tools/image . --print-name: %v", err)
	}
	name := strings.TrimSpace(string(b))
	if want != "" && name != want {
		t.Errorf("tools/image names the image %s by default, want %s", name, want)
	}
	if !strings.HasPrefix(name, "ghcr.io/kubevents/eventsd:") {
		t.Errorf("tools/image's default name %s is not the release's image", name)
	}
	for _, base := range []string{"mirror", "replicas"} {
		r := eventsdtest.RunKubectl(ctx, t, "", nil, "kustomize", filepath.Join(root, "deploy", "kustomize", base))
		if r.Err != nil {
			t.Fatalf("kubectl kustomize %s: %v\n%s", base, r.Err, r.Stderr)
		}
		if imgs := eventsdImages(t, []byte(r.Stdout)); !slices.Equal(imgs, []string{name}) {
			t.Errorf("the kustomize base %s runs %v, tools/image builds %s", base, imgs, name)
		}
	}
	t.Run("chart", func(t *testing.T) {
		chart := filepath.Join(root, "deploy", "helm", "eventsd")
		for _, values := range []string{"", filepath.Join(chart, "ci", "replicas-values.yaml")} {
			args := []string{"template", "eventsd", chart}
			if values != "" {
				args = append(args, "--values", values)
			}
			if imgs := eventsdImages(t, []byte(helm(t, args...))); !slices.Equal(imgs, []string{name}) {
				t.Errorf("helm %v runs %v, tools/image builds %s", args, imgs, name)
			}
		}
	})
}

// helm runs helm (helmbin.Run), skipping the test when it is not built
// and cannot be in the time left.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	return helmbin.Run(t, args...)
}

// eventsdImages are the images of the containers named eventsd in the
// workloads of a multi-document manifest.
func eventsdImages(t *testing.T, manifests []byte) []string {
	t.Helper()
	var imgs []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return imgs
		} else if err != nil {
			t.Fatal(err)
		}
		cs, _, err := unstructured.NestedSlice(m, "spec", "template", "spec", "containers")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			c, _ := c.(map[string]any)
			if c["name"] == "eventsd" {
				img, _ := c["image"].(string)
				imgs = append(imgs, img)
			}
		}
	}
}

// dirNames are the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// checkSums checks that dir's SHA256SUMS has the right sum of every
// other file in it, in sha256sum's format.
func checkSums(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var listed []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not \"<sum>  <name>\"", sc.Text())
		}
		if got := fileHash(t, filepath.Join(dir, name)); got != sum {
			t.Errorf("SHA256SUMS says %s for %s, it is %s", sum, name, got)
		}
		listed = append(listed, name)
	}
	all := slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return n == "SHA256SUMS" })
	if !slices.Equal(listed, all) {
		t.Errorf("SHA256SUMS lists %v, the release holds %v", listed, all)
	}
}

func fileHash(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// archived is one file of an archive.
type archived struct {
	hdr  *tar.Header
	body []byte
}

func readArchive(t *testing.T, p string) []archived {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var files []archived
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, archived{h, body})
	}
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
