// Package eventsdtest runs real eventsd processes on loopback for
// end-to-end tests, and finds the real kubectl for them.
package eventsdtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/kubevents/kubevents/internal/buildcache"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/internal/syncbuf"
)

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	binPath   string
)

// Prepare builds eventsd and finds or builds kubectl ahead of the tests,
// for a TestMain; Binary and Kubectl then return at once.
func Prepare() error {
	buildEventsd()
	if buildErr != nil {
		return buildErr
	}
	findKubectl()
	return kubectlErr
}

// Binary builds cmd/eventsd once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildEventsd()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func buildEventsd() {
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "eventsd-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "eventsd")
		cmd := exec.Command(buildcache.GoTool(), "build", "-o", binPath, "./cmd/eventsd")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building eventsd: %v\n%s", err, out)
		}
	})
}

// Options configure Start.
type Options struct {
	// DataDir is the store directory; a new temporary one when empty.
	DataDir string
	// Listen is the address; 127.0.0.1:0 (any free port) when empty.
	Listen string
	// Args are extra eventsd flags.
	Args []string
	// Binary is the eventsd to run; the one built from this module (Binary)
	// when empty.
	Binary string
}

// Process is a running eventsd.
type Process struct {
	t       testing.TB
	opts    Options
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
	logs    *syncbuf.Buffer

	// Addr is host:port; URL is the base URL.
	Addr, URL string
}

var addrRE = regexp.MustCompile(`msg="eventsd serving" addr=(\S+) url=(\S+)`)

// Start runs eventsd and waits until it serves /readyz. The process is
// killed when the test ends; its log is printed if the test failed.
func Start(t testing.TB, opts Options) *Process {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	p := &Process{t: t, opts: opts, logs: &syncbuf.Buffer{}}
	p.start()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("eventsd log:\n%s", p.logs.String())
		}
	})
	return p
}

func (p *Process) start() {
	p.t.Helper()
	args := append([]string{"--listen", p.opts.Listen, "--data-dir", p.opts.DataDir}, p.opts.Args...)
	bin := p.opts.Binary
	if bin == "" {
		bin = Binary(p.t)
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stdout = p.logs
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stderr, p.logs))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr) //nolint:errcheck // drain
	}()
	go func() {
		p.exitErr = cmd.Wait()
		close(p.done)
	}()
	select {
	case m := <-found:
		p.Addr, p.URL = m[0], m[1]
		// Restart on the same address, so clients' configs stay valid.
		p.opts.Listen = p.Addr
	case <-p.done:
		p.t.Fatalf("eventsd exited before serving: %v\n%s", p.exitErr, p.logs.String())
	case <-time.After(30 * time.Second):
		p.t.Fatalf("eventsd did not start within 30s\n%s", p.logs.String())
	}
	p.waitReady()
}

func (p *Process) waitReady() {
	p.t.Helper()
	client := &http.Client{Timeout: time.Second}
	if strings.HasPrefix(p.URL, "https") {
		client.Transport = &http.Transport{TLSClientConfig: insecureTLS()}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(p.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("eventsd at %s not ready within 30s\n%s", p.URL, p.logs.String())
}

// Logs returns what the process has logged so far.
func (p *Process) Logs() string { return p.logs.String() }

// PID is the process id of the running eventsd.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to end: a crash.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// Stop sends SIGTERM and waits for a clean exit, failing the test if the
// process does not exit 0 within 30 seconds.
func (p *Process) Stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.exitErr != nil {
			p.t.Fatalf("eventsd exited with %v after SIGTERM\n%s", p.exitErr, p.logs.String())
		}
	case <-time.After(30 * time.Second):
		p.Kill()
		p.t.Fatalf("eventsd did not exit within 30s of SIGTERM\n%s", p.logs.String())
	}
}

// Restart starts the process again on the same address and data
// directory; the previous one must have ended (Kill or Stop).
func (p *Process) Restart() {
	p.t.Helper()
	select {
	case <-p.done:
	default:
		p.t.Fatal("Restart of a running eventsd")
	}
	p.start()
}

// RESTConfig returns a client-go config for the process.
func (p *Process) RESTConfig() *rest.Config {
	c := &rest.Config{Host: p.URL, QPS: -1, Timeout: 30 * time.Second}
	if strings.HasPrefix(p.URL, "https") {
		c.TLSClientConfig.Insecure = true
	}
	return c
}

// Clientset returns a typed client-go clientset for the process.
func (p *Process) Clientset() kubernetes.Interface {
	p.t.Helper()
	cs, err := kubernetes.NewForConfig(p.RESTConfig())
	if err != nil {
		p.t.Fatal(err)
	}
	return cs
}

// Kubeconfig writes a kubeconfig for the process (namespace default) and
// returns its path.
func (p *Process) Kubeconfig() string {
	p.t.Helper()
	path := filepath.Join(p.t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: eventsd
  cluster:
    server: %s
    insecure-skip-tls-verify: %v
contexts:
- name: eventsd
  context: {cluster: eventsd, namespace: default, user: test}
current-context: eventsd
users:
- name: test
  user: {}
`, p.URL, strings.HasPrefix(p.URL, "https"))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

var (
	kubectlOnce sync.Once
	kubectlPath string
	kubectlErr  error
)

// KubectlEnv names the environment variable that overrides which kubectl
// the tests use: a path, or "build" to build it from the k8s.io/kubectl
// module even when one is on PATH (to test that path). Unset, the tests
// use the kubectl on PATH, else build one. A built kubectl is kept under
// the user's cache directory (os.UserCacheDir()/kubevents/kubectl-KEY,
// KEY a hash of tools/kubectl and the toolchain) and reused by later runs;
// a build for another key is removed when a new one is made.
const KubectlEnv = "KUBEVENTS_TEST_KUBECTL"

// Kubectl returns a kubectl binary: the one on PATH or, when there is
// none, one built from the k8s.io/kubectl module (tools/kubectl). Tests
// that need kubectl are never skipped for want of it.
func Kubectl(t testing.TB) string {
	t.Helper()
	findKubectl()
	if kubectlErr != nil {
		t.Fatal(kubectlErr)
	}
	return kubectlPath
}

func findKubectl() {
	kubectlOnce.Do(func() {
		override := os.Getenv(KubectlEnv)
		if override != "" && override != "build" {
			kubectlPath = override
			return
		}
		if p, err := exec.LookPath("kubectl"); err == nil && override == "" {
			kubectlPath = p
			return
		}
		src := filepath.Join(repoRoot(), "tools", "kubectl")
		key, err := kubectlKey(src)
		if err != nil {
			kubectlErr = err
			return
		}
		kubectlPath, kubectlErr = buildcache.Get(buildcache.Root(), kubectlBuildPrefix, key, "kubectl", func(out string) error {
			cmd := exec.Command(buildcache.GoTool(), "build", "-o", out, ".")
			cmd.Dir = src
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("no kubectl on PATH, and building it from k8s.io/kubectl failed: %w\n%s", err, out)
			}
			return nil
		})
	})
}

// KubectlResult is the outcome of one kubectl run.
type KubectlResult struct {
	Stdout, Stderr string
	Err            error
}

// Kubectl runs kubectl against the process with a fresh discovery cache
// and returns its output; it fails the test if kubectl runs over a minute.
func (p *Process) Kubectl(kubeconfig string, args ...string) KubectlResult {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return RunKubectl(ctx, p.t, kubeconfig, nil, args...)
}

// RunKubectl runs kubectl with kubeconfig; stdin may be nil.
func RunKubectl(ctx context.Context, t testing.TB, kubeconfig string, stdin io.Reader, args ...string) KubectlResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, Kubectl(t), append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, stdin
	cmd.Env = append(os.Environ(), "KUBECTL_COMMAND_HEADERS=true")
	err := cmd.Run()
	return KubectlResult{Stdout: out.String(), Stderr: errb.String(), Err: err}
}

// FreeAddr is a loopback address whose port is free now, for a server a
// test starts: fixed ports (8080) may be held by another test.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
