// Command image builds the container image of eventsd (with evctl) as an
// OCI image archive, without pulling a base image from any registry: the
// image holds the two static binaries (CGO_ENABLED=0), a passwd and group
// naming the non-root user 65532, and the empty directories eventsd needs,
// in one layer assembled here with go-containerregistry. Run from the
// repository root:
//
//	go run -C tools/image .                # writes bin/eventsd-image.tar
//	go run -C tools/image . --platform linux/amd64,linux/arm64 --output /tmp/eventsd.tar
//	go run -C tools/image . --print-name   # the default name, and nothing built
//
// The image's default name is the one the chart and the kustomize bases
// install: the chart's image.repository and appVersion
// (ghcr.io/kubevents/eventsd:v0.1.0), read from deploy/helm/eventsd, so
// that the image built here and imported on a node is the one a plain
// `helm install` runs. A release (tools/release) names it, and stamps its
// binaries, with the release's version (--name, --release).
//
// The build is reproducible: the same sources and Go toolchain give the
// same image digest, byte for byte (-trimpath, no build id, every file
// time and the image's creation time set to SOURCE_DATE_EPOCH, else the
// time of the commit checked out, else 1970). The archive is an OCI
// image layout in a tar file (oci-archive), which `podman load`, `skopeo
// copy oci-archive:...`, `ctr images import` and `docker load` (25 and
// later) read. It is its own module so that go-containerregistry stays
// out of the project's go.mod.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// UID and GID are the user the image runs as: not root, and the
	// same number distroless images use for "nonroot".
	UID, GID = 65532, 65532
	// binDir holds the binaries in the image.
	binDir = "usr/local/bin"
	// DataDir is eventsd's --data-dir in the image, a volume.
	DataDir = "/var/lib/eventsd"
	// Port is the port eventsd listens on in the image.
	Port = 8080
	// buildinfoPkg takes the build's facts with -X.
	buildinfoPkg = "github.com/kubevents/kubevents/internal/buildinfo"
)

// commands are the binaries the image holds; the first is its entrypoint.
var commands = []string{"eventsd", "evctl"}

// Options configure one build.
type Options struct {
	// Source is the repository root.
	Source string
	// Output is the archive written.
	Output string
	// Name is the image's name (its ref in the archive).
	Name string
	// Platforms are os/arch[/variant] pairs; more than one makes an
	// image index.
	Platforms []string
	// Release is the release's version stamped in the binaries
	// (internal/buildinfo's release); empty for a build that is not one.
	Release string
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("image", flag.ContinueOnError)
	src := fset.String("source", "", "The repository root (default: found from this program's source).")
	out := fset.String("output", filepath.Join("bin", "eventsd-image.tar"), "The OCI archive to write; a relative path is relative to the repository root.")
	name := fset.String("name", "", "The image's name in the archive (default: the chart's image, <image.repository>:<appVersion> of deploy/helm/eventsd, as a plain helm install runs it).")
	tag := fset.String("tag", "", "The image's tag, with the chart's image.repository (instead of --name).")
	release := fset.String("release", "", "The release's version to stamp in the binaries (internal/buildinfo's release), as tools/release does.")
	printName := fset.Bool("print-name", false, "Print the image's name and exit, building nothing.")
	platforms := fset.String("platform", runtime.GOOS+"/"+runtime.GOARCH, "Comma-separated platforms (linux/amd64,linux/arm64); more than one makes a multi-platform image index.")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fset.Args())
	}
	o := Options{Source: *src, Output: *out, Name: *name, Platforms: strings.Split(*platforms, ","), Release: *release}
	if o.Source == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		o.Source = root
	}
	if *tag != "" {
		if o.Name != "" {
			return errors.New("give --name or --tag, not both")
		}
		repo, _, err := chartImage(o.Source)
		if err != nil {
			return err
		}
		o.Name = repo + ":" + *tag
	}
	if *printName {
		n := o.Name
		if n == "" {
			var err error
			if n, err = DefaultName(o.Source); err != nil {
				return err
			}
		}
		fmt.Fprintln(stdout, n)
		return nil
	}
	if !filepath.IsAbs(o.Output) {
		o.Output = filepath.Join(o.Source, o.Output)
	}
	start := time.Now()
	res, err := Build(o)
	if err != nil {
		return err
	}
	fi, err := os.Stat(o.Output)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image %s\ndigest %s\narchive %s (%d bytes)\nbuilt in %v\n", res.Name, res.Digest, o.Output, fi.Size(), time.Since(start).Round(time.Millisecond))
	return nil
}

// repoRoot is the repository this program's source is in (go run builds
// it with its full path).
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(file) {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		if _, err := os.Stat(filepath.Join(root, "cmd", "eventsd")); err == nil {
			return filepath.Clean(root), nil
		}
	}
	return "", errors.New("cannot find the repository root from this program's source: give --source")
}

// Result is what Build made.
type Result struct {
	// Name is the image's name in the archive.
	Name string
	// Digest is the image manifest's digest, or the index's for several
	// platforms: what a registry shows after a push.
	Digest v1.Hash
}

// source is what the repository says of the build.
type source struct {
	commit, treeState string
	epoch             time.Time
}

// Build builds the binaries for each platform and writes the archive.
func Build(o Options) (Result, error) {
	s, err := describe(o.Source)
	if err != nil {
		return Result{}, err
	}
	if o.Name == "" {
		if o.Name, err = DefaultName(o.Source); err != nil {
			return Result{}, err
		}
	}
	tmp, err := os.MkdirTemp("", "eventsd-image-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp)

	var imgs []v1.Image
	var plats []v1.Platform
	for _, p := range o.Platforms {
		plat, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return Result{}, fmt.Errorf("--platform %q: %w", p, err)
		}
		if plat.OS != "linux" {
			return Result{}, fmt.Errorf("--platform %q: the image is for linux", p)
		}
		bins := filepath.Join(tmp, strings.ReplaceAll(plat.String(), "/", "-"))
		if err := buildBinaries(o.Source, bins, *plat, s, o.Release); err != nil {
			return Result{}, err
		}
		img, err := image(bins, *plat, s, o.Name)
		if err != nil {
			return Result{}, err
		}
		imgs, plats = append(imgs, img), append(plats, *plat)
	}

	dir := filepath.Join(tmp, "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return Result{}, err
	}
	ref := layout.WithAnnotations(map[string]string{
		// What podman, skopeo and docker name the loaded image after.
		"org.opencontainers.image.ref.name": o.Name,
		// What containerd's ctr import names it after.
		"io.containerd.image.name": o.Name,
	})
	var digest v1.Hash
	if len(imgs) == 1 {
		if err := lp.AppendImage(imgs[0], ref); err != nil {
			return Result{}, err
		}
		digest, err = imgs[0].Digest()
	} else {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for i, img := range imgs {
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plats[i]}})
		}
		if err := lp.AppendIndex(idx, ref); err != nil {
			return Result{}, err
		}
		digest, err = idx.Digest()
	}
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(filepath.Dir(o.Output), 0o755); err != nil {
		return Result{}, err
	}
	if err := tarDir(dir, o.Output, s.epoch); err != nil {
		return Result{}, err
	}
	return Result{Name: o.Name, Digest: digest}, nil
}

// describe reads the commit, tree state and time to stamp from git, if
// the source is a git checkout (git on PATH), and SOURCE_DATE_EPOCH.
func describe(root string) (source, error) {
	var s source
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if commit, err := git("rev-parse", "HEAD"); err == nil && len(commit) >= 12 {
		s.commit = commit
		s.treeState = "clean"
		if st, err := git("status", "--porcelain", "--untracked-files=no"); err != nil {
			return s, fmt.Errorf("git status: %w", err)
		} else if st != "" {
			s.treeState = "dirty"
		}
		ct, err := git("log", "-1", "--format=%ct")
		if err != nil {
			return s, fmt.Errorf("git log: %w", err)
		}
		sec, err := strconv.ParseInt(ct, 10, 64)
		if err != nil {
			return s, fmt.Errorf("git log: the commit time %q: %w", ct, err)
		}
		s.epoch = time.Unix(sec, 0).UTC()
	} else {
		s.epoch = time.Unix(0, 0).UTC()
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
		}
		s.epoch = time.Unix(sec, 0).UTC()
	}
	return s, nil
}

// buildBinaries builds the commands for plat into dir: static, without
// paths of this machine, build id or symbol tables, stamped with the
// commit.
func buildBinaries(root, dir string, plat v1.Platform, s source, release string) error {
	ldflags := []string{"-s", "-w", "-buildid="}
	if release != "" {
		ldflags = append(ldflags, "-X", buildinfoPkg+".release="+release)
	}
	if s.commit != "" {
		ldflags = append(ldflags,
			"-X", buildinfoPkg+".gitCommit="+s.commit,
			"-X", buildinfoPkg+".gitTreeState="+s.treeState,
			"-X", buildinfoPkg+".buildDate="+s.epoch.Format(time.RFC3339))
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", strings.Join(ldflags, " "), "-o", dir + string(os.PathSeparator)}
	for _, c := range commands {
		args = append(args, "./cmd/"+c)
	}
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = root
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "CGO_ENABLED=") || strings.HasPrefix(kv, "GOOS=") || strings.HasPrefix(kv, "GOARCH=") || strings.HasPrefix(kv, "GOARM=")
	})
	env = append(env, "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture)
	if plat.Architecture == "arm" && plat.Variant != "" {
		env = append(env, "GOARM="+strings.TrimPrefix(plat.Variant, "v"))
	}
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %w\n%s", plat.String(), err, out)
	}
	return nil
}

// goTool is the go command of the toolchain running this program.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// image makes the image of the binaries in bins.
func image(bins string, plat v1.Platform, s source, name string) (v1.Image, error) {
	layerTar, err := rootfs(bins, s.epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.epoch}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: created, CreatedBy: "go run -C tools/image .", Comment: "eventsd and evctl, static; passwd, group; " + DataDir,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	labels := map[string]string{
		"org.opencontainers.image.title":       "eventsd",
		"org.opencontainers.image.description": "The Kubernetes events API server of kubevents, with evctl",
		"org.opencontainers.image.created":     s.epoch.Format(time.RFC3339),
		"org.opencontainers.image.ref.name":    name,
	}
	if s.commit != "" {
		labels["org.opencontainers.image.revision"] = s.commit
	}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint:   []string{"/" + binDir + "/" + commands[0]},
		Cmd:          []string{fmt.Sprintf("--listen=:%d", Port), "--data-dir=" + DataDir},
		Env:          []string{"PATH=/" + binDir},
		WorkingDir:   "/home/nonroot",
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}},
		Volumes:      map[string]struct{}{DataDir: {}},
		Labels:       labels,
		StopSignal:   "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// entry is one file or directory of the image's filesystem.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	body     []byte // a regular file's content; nil for a directory
	dir      bool
}

// rootfs is the image's one layer, a gzip-compressed tar: every entry
// with the same time and fixed owners, in a fixed order.
func rootfs(bins string, epoch time.Time) ([]byte, error) {
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", GID)},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, body: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: GID, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: binDir + "/", mode: 0o755, dir: true},
	}
	for _, c := range commands {
		b, err := os.ReadFile(filepath.Join(bins, c))
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{name: binDir + "/" + c, mode: 0o755, body: b})
	}
	entries = append(entries,
		entry{name: "var/", mode: 0o755, dir: true},
		entry{name: "var/lib/", mode: 0o755, dir: true},
		entry{name: strings.TrimPrefix(DataDir, "/") + "/", mode: 0o700, uid: UID, gid: GID, dir: true},
	)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir to the tar file out, in name order,
// each with time epoch and owner root; out is replaced only when it is
// complete.
func tarDir(dir, out string, epoch time.Time) error {
	var names []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(names)
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".writing-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	tw := tar.NewWriter(f)
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			b, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, b)
			b.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}
