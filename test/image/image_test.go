// Package image_test builds eventsd's container image with tools/image and
// runs it under a real container runtime, Debian's podman (with runc), as
// a cluster would: read-only root filesystem, every capability dropped, no
// new privileges, its data on a named volume. The test skips, saying so,
// where podman is not installed (.ci/run installs it).
package image_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// repo is the repository root.
func repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// built is what one run of the builder printed.
type built struct {
	name, digest string
	archive      string
	elapsed      time.Duration
}

var (
	imageRE  = regexp.MustCompile(`(?m)^image (\S+)$`)
	digestRE = regexp.MustCompile(`(?m)^digest (sha256:[0-9a-f]{64})$`)
)

// buildImage runs the README's command, `go run -C tools/image .`, with
// --output out.
func buildImage(t *testing.T, out string) built {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(buildcache.GoTool(), "run", "-C", filepath.Join(repo(), "tools", "image"), ".", "--output", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run -C tools/image .: %v\n%s", err, b)
	}
	name, digest := imageRE.FindSubmatch(b), digestRE.FindSubmatch(b)
	if name == nil || digest == nil {
		t.Fatalf("the builder did not say which image it built:\n%s", b)
	}
	return built{name: string(name[1]), digest: string(digest[1]), archive: out, elapsed: time.Since(start)}
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// podman runs podman on storage of the test's own (vfs: no mounts left
// behind), with runc where it is installed (Debian's crun refuses hybrid
// cgroup hierarchies) and without journald.
type podman struct {
	t    *testing.T
	bin  string
	base []string
}

func newPodman(t *testing.T) *podman {
	bin, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman is not installed (apt-get install podman runc; .ci/run installs them): the image is built but not run")
	}
	dir := t.TempDir()
	base := []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--tmpdir", filepath.Join(dir, "tmp"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file"}
	if _, err := exec.LookPath("runc"); err == nil {
		base = append(base, "--runtime", "runc")
	}
	p := &podman{t: t, bin: bin, base: base}
	t.Cleanup(func() {
		p.try("rm", "--all", "--force", "--time", "0")
		p.try("volume", "rm", "--all", "--force")
		p.try("system", "reset", "--force")
	})
	return p
}

// try runs podman and returns its stdout, stderr and error.
func (p *podman) try(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, append(append([]string{}, p.base...), args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// run runs podman and fails the test on an error.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	out, errb, err := p.try(args...)
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, out, errb)
	}
	return out
}

// ulimits keep the container's limits within this machine's: podman as
// root asks for more open files and processes (1048576) than a sandboxed
// machine may allow, and the container's process cannot raise them. Open
// files: the test process's own limit; processes (threads, counted per
// user): 4096, plenty for eventsd.
func ulimits(t *testing.T) []string {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	return []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", r.Cur, r.Cur), "--ulimit", "nproc=4096:4096"}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestImage: the builder makes the same image twice (same digest, same
// archive bytes); the image is one layer, runs as 65532:65532 and holds
// static binaries (there is no libc in it); under podman, with a
// read-only root filesystem, no capabilities and no new privileges,
// eventsd serves /readyz, takes an event, and still has it (same uid)
// after a restart of its container and in a new container on the same
// volume, whose files belong to 65532; evctl in the image lists it.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	a := buildImage(t, filepath.Join(dir, "a.tar"))
	b := buildImage(t, filepath.Join(dir, "b.tar"))
	fi, err := os.Stat(a.archive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s %s: %d bytes; built in %v (first), %v (again)", a.name, a.digest, fi.Size(), a.elapsed.Round(time.Millisecond), b.elapsed.Round(time.Millisecond))
	if a.digest != b.digest || a.name != b.name {
		t.Fatalf("two builds of the same sources: %s %s and %s %s", a.name, a.digest, b.name, b.digest)
	}
	if fileSum(t, a.archive) != fileSum(t, b.archive) {
		t.Fatal("two builds of the same sources wrote different archives")
	}

	pm := newPodman(t)
	loaded := pm.run("load", "--input", a.archive)
	m := regexp.MustCompile(`Loaded image: (\S+)`).FindStringSubmatch(loaded)
	if m == nil {
		t.Fatalf("podman load said %q", loaded)
	}
	ref := m[1]
	if !strings.HasSuffix(ref, a.name) {
		t.Errorf("podman loaded %s, the builder named it %s", ref, a.name)
	}
	var inspect []struct {
		Digest       string
		Architecture string
		Os           string
		Size         int64
		User         string
		Config       struct{ User string }
		RootFS       struct{ Layers []string }
	}
	if err := json.Unmarshal([]byte(pm.run("image", "inspect", ref)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v %v", err, inspect)
	}
	img := inspect[0]
	t.Logf("podman: %s/%s, %d bytes unpacked, digest %s", img.Os, img.Architecture, img.Size, img.Digest)
	if img.Digest != a.digest {
		t.Errorf("podman's digest %s, the builder's %s", img.Digest, a.digest)
	}
	if img.Config.User != "65532:65532" || len(img.RootFS.Layers) != 1 || img.Architecture != runtime.GOARCH {
		t.Errorf("the image runs as %q, has %d layers, is for %s; want 65532:65532, 1, %s", img.Config.User, len(img.RootFS.Layers), img.Architecture, runtime.GOARCH)
	}

	// The image's binaries are static: they run in an image with no libc.
	if out := pm.run(append([]string{"run", "--rm", "--network", "none", "--read-only", "--entrypoint", "/usr/local/bin/evctl"}, ulimitArgs(t, ref, "--version")...)...); !strings.HasPrefix(out, "evctl v1.32.0-kubevents") {
		t.Errorf("evctl --version in the image: %q", out)
	}

	pm.run("volume", "create", "eventsd-data")
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	start := func(name string) {
		t.Helper()
		args := append([]string{"run", "--detach", "--name", name, "--network", "host", "--read-only", "--cap-drop", "ALL",
			"--security-opt", "no-new-privileges", "--volume", "eventsd-data:/var/lib/eventsd"}, ulimits(t)...)
		pm.run(append(args, ref, fmt.Sprintf("--listen=127.0.0.1:%d", port), "--data-dir=/var/lib/eventsd")...)
		waitReady(t, pm, name, url)
	}
	start("eventsd-1")

	cs, err := kubernetes.NewForConfig(&rest.Config{Host: url, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	created, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-1.image"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"}, Reason: "BackOff",
		Message: "Back-off restarting failed container web", Type: corev1.EventTypeWarning, Count: 1}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	still := func(when string) {
		t.Helper()
		got, err := cs.CoreV1().Events("default").Get(ctx, "web-1.image", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got.UID != created.UID || got.Message != created.Message {
			t.Fatalf("%s: the event is %s %q, was %s %q", when, got.UID, got.Message, created.UID, created.Message)
		}
	}

	// A restart of the container (SIGTERM, then a start).
	pm.run("restart", "--time", "30", "eventsd-1")
	waitReady(t, pm, "eventsd-1", url)
	still("after a restart of the container")

	// A new container: only the volume is kept.
	pm.run("rm", "--force", "--time", "30", "eventsd-1")
	start("eventsd-2")
	still("in a new container on the same volume")
	if out := pm.run("exec", "eventsd-2", "evctl", "--server", url, "get", "-A"); !strings.Contains(out, "web-1") || !strings.Contains(out, "BackOff") {
		t.Errorf("evctl get -A in the container:\n%s", out)
	}

	// The store's files are the non-root user's.
	mountpoint := strings.TrimSpace(pm.run("volume", "inspect", "--format", "{{.Mountpoint}}", "eventsd-data"))
	entries, err := os.ReadDir(mountpoint)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the volume at %s: %v, %d entries", mountpoint, err, len(entries))
	}
	for _, e := range append([]os.DirEntry{nil}, entries...) {
		p := mountpoint
		if e != nil {
			p = filepath.Join(mountpoint, e.Name())
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 65532 {
			t.Errorf("%s belongs to uid %d, want 65532", p, st.Uid)
		}
	}
}

// ulimitArgs are the ulimit flags, the image and its arguments.
func ulimitArgs(t *testing.T, ref string, args ...string) []string {
	return append(append(ulimits(t), ref), args...)
}

// waitReady waits up to a minute for /readyz to answer 200, failing with
// the container's log.
func waitReady(t *testing.T, pm *podman, name, url string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(url + "/readyz")
		if err != nil {
			last = err.Error()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = strconv.Itoa(resp.StatusCode) + " " + string(b)
	}
	logs, errb, _ := pm.try("logs", name)
	state, _, _ := pm.try("ps", "--all")
	t.Fatalf("eventsd in container %s not ready within a minute (%s)\n%s%s\n%s", name, last, logs, errb, state)
}
