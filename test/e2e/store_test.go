package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubevents/kubevents/internal/eventsdtest"
)

// TestSecondEventsdOnSameDataDir: a second eventsd on a data directory in
// use exits 1 with a message naming the directory, its lock file and the
// pid of the eventsd holding it.
func TestSecondEventsdOnSameDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := eventsdtest.Start(t, eventsdtest.Options{DataDir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, eventsdtest.Binary(t), "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("second eventsd: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{
		"data directory " + dir + " is in use by another eventsd",
		"lock file " + dir + "/LOCK",
		fmt.Sprintf("held by pid %d", p.PID()),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("second eventsd says %q; want it to say %q", out, want)
		}
	}
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory, or skips the
// test when that is not possible (it needs root).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a small tmpfs to fill needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillLeaving writes a ballast file so that about leave bytes stay free on
// the filesystem of dir.
func fillLeaving(t *testing.T, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * int64(st.Bsize)
	path := filepath.Join(dir, "ballast")
	if err := os.WriteFile(path, make([]byte, max(avail-leave, 0)), 0o600); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	return path
}

func readyzCode(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDiskFull runs eventsd on a small tmpfs and fills it: writes get 507
// naming the store and the full disk, /readyz fails, reads go on, nothing
// panics; freeing space brings writes and readiness back by themselves.
// Then eventsd is stopped and started on the full disk: it serves reads
// and reports the condition, takes writes once space is freed, and SIGTERM
// stops it. After a restart every acknowledged write is there.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, 16<<20)
	data := filepath.Join(mnt, "data")
	const reserve = 2 << 20
	p := eventsdtest.Start(t, eventsdtest.Options{DataDir: data, Args: []string{"--min-free-disk-bytes", fmt.Sprint(reserve)}})
	cs := p.Clientset()
	ctx := cgCtx(t)
	const ns = "full"
	ballast := fillLeaving(t, mnt, reserve+(1<<20))
	acked := map[string]cgAck{}
	var refusal error
	for i := 0; i < 5000 && refusal == nil; i++ {
		ev := cgCoreEvent(ns, fmt.Sprintf("e-%05d", i), "pod")
		ev.Message = strings.Repeat("m", 4000)
		out, err := cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
		if err != nil {
			refusal = err
			break
		}
		acked[ev.Name] = cgAck{uid: out.UID, rv: cgRV(t, out.ResourceVersion)}
	}
	var se *apierrors.StatusError
	if !errors.As(refusal, &se) || se.ErrStatus.Code != http.StatusInsufficientStorage ||
		!strings.Contains(refusal.Error(), "no space left on device") || !strings.Contains(refusal.Error(), data) {
		t.Fatalf("create on a full disk: %v, want 507 naming %s and the full disk", refusal, data)
	}
	t.Logf("%d creates acknowledged, then: %v", len(acked), refusal)
	if code, body := readyzCode(t, p.URL); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Fatalf("/readyz on a full disk: %d %q", code, body)
	}
	cgCheckAcked(t, cs, ns, acked, true)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	cgPoll(t, 15*time.Second, "/readyz 200 after freeing space", func() (bool, string) {
		code, body := readyzCode(t, p.URL)
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
	out, err := cs.CoreV1().Events(ns).Create(ctx, cgCoreEvent(ns, "after-free", "pod"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create after freeing space: %v", err)
	}
	acked["after-free"] = cgAck{uid: out.UID, rv: cgRV(t, out.ResourceVersion)}
	p.Stop()

	// Start on a full disk: it serves, reads work, /readyz says why not.
	ballast = fillLeaving(t, mnt, reserve/2)
	cmd := exec.Command(eventsdtest.Binary(t), "--listen", p.Addr, "--data-dir", data, "--min-free-disk-bytes", fmt.Sprint(reserve))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	logLines := 0
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logLines++
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	serving := regexp.MustCompile(`msg="eventsd serving"`)
	deadline := time.After(30 * time.Second)
	for started := false; !started; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("eventsd on a full disk exited: %v", cmd.Wait())
			}
			started = serving.MatchString(l)
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("eventsd on a full disk did not start serving within 30s")
		}
	}
	if code, body := readyzCode(t, p.URL); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Errorf("/readyz when started on a full disk: %d %q", code, body)
	}
	cgCheckAcked(t, cs, ns, acked, true)
	_, err = cs.CoreV1().Events(ns).Create(ctx, cgCoreEvent(ns, "refused", "pod"), metav1.CreateOptions{})
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInsufficientStorage {
		t.Errorf("create when started on a full disk: %v, want 507", err)
	}
	// Space comes back: it reopens its database and takes writes.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	cgPoll(t, 15*time.Second, "/readyz 200 after freeing space", func() (bool, string) {
		code, body := readyzCode(t, p.URL)
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
	out, err = cs.CoreV1().Events(ns).Create(ctx, cgCoreEvent(ns, "after-start-full", "pod"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create after freeing space: %v", err)
	}
	acked["after-start-full"] = cgAck{uid: out.UID, rv: cgRV(t, out.ResourceVersion)}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("eventsd started on a full disk exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("eventsd started on a full disk ignored SIGTERM for 30s")
	}
	if logLines > 50 {
		t.Errorf("eventsd started on a full disk logged %d lines", logLines)
	}

	p.Restart()
	cgCheckAcked(t, cs, ns, acked, true)
}
