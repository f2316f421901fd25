package readme

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/doctest"
	"github.com/kubevents/kubevents/internal/eventsdtest"
	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// pageBlocks returns the ```sh blocks of the page at path by key, after
// checking that every block is accounted for: each key of run (the
// blocks the test runs) and of notRun (the blocks it does not, with the
// reason) is a text found in exactly one block, and each block is found
// by exactly one key. A block added to the page, or a key whose block
// changed or went, fails the test until the test says what to do with
// it.
func pageBlocks(t *testing.T, path string, run []string, notRun map[string]string) map[string]string {
	t.Helper()
	blocks := docBlocks(t, path)
	keys := append([]string(nil), run...)
	for k := range notRun {
		keys = append(keys, k)
	}
	byKey := map[string]string{}
	claims := make([]int, len(blocks))
	for _, k := range keys {
		if _, dup := byKey[k]; dup {
			t.Fatalf("%s: the key %q is listed twice (run, or run and not run)", path, k)
		}
		var found []int
		for i, b := range blocks {
			if strings.Contains(b, k) {
				found = append(found, i)
			}
		}
		if len(found) != 1 {
			t.Errorf("%s: %d blocks contain %q, want 1: the page changed; say here which block it now is", path, len(found), k)
			continue
		}
		byKey[k] = blocks[found[0]]
		claims[found[0]]++
	}
	for i, b := range blocks {
		if claims[i] != 1 {
			t.Errorf("%s: the block\n%s\nis claimed by %d keys, want 1: run it here, or list it in notRun with why", path, b, claims[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return byKey
}

// replace is s with old replaced by new, failing the test when s does
// not contain old: a substitution that no longer applies is a page that
// changed under the test.
func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("the block no longer contains %q:\n%s", old, s)
	}
	return strings.ReplaceAll(s, old, new)
}

// reader is a reader's shell: a working directory, a HOME of the test's
// own (for ~/.kube/config), no KUBECONFIG, and a PATH with the built
// commands and kubectl first.
type reader struct {
	t   *testing.T
	dir string
	env []string
}

// newReader makes a reader's shell in dir with bin first on PATH and
// home as HOME (when not empty: the user's HOME holds the build caches
// devcluster reads kube-apiserver and etcd from).
func newReader(t *testing.T, dir, bin, home string) *reader {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "KUBECONFIG", "PATH":
		case "HOME":
			if home == "" {
				env = append(env, kv)
			}
		default:
			env = append(env, kv)
		}
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return &reader{t: t, dir: dir, env: env}
}

// run runs a block to its end and returns what it printed and its error.
func (r *reader) run(block string) (string, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	out, err := doctest.Run(ctx, doctest.Command{Block: block, Dir: r.dir, Env: r.env})
	r.t.Logf("$ %s(%v, %v)\n%s", block, time.Since(start).Round(time.Millisecond), err, out)
	return out, err
}

// terminal runs a block in a terminal of its own and waits until it has
// printed ready. stop ends it as Ctrl-C would (at the latest when the
// test ends) and logs what it printed.
func (r *reader) terminal(block, ready string) (term *doctest.Terminal, stop func()) {
	r.t.Helper()
	term, err := doctest.Start(doctest.Command{Block: block, Dir: r.dir, Env: r.env})
	if err != nil {
		r.t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			r.t.Logf("$ %s(stopped)\n%s", block, term.Stop(30*time.Second))
		}
	}
	r.t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := term.WaitFor(ctx, ready); err != nil {
		stop()
		r.t.Fatal(err)
	}
	return term, stop
}

// servingRE is eventsd's line saying where it serves.
var servingRE = regexp.MustCompile(`msg="eventsd serving" addr=(\S+)`)

// servingAddr is the address an eventsd terminal serves on.
func servingAddr(t *testing.T, term *doctest.Terminal) string {
	t.Helper()
	m := servingRE.FindStringSubmatch(term.Output())
	if m == nil {
		t.Fatalf("eventsd did not say where it serves:\n%s", term.Output())
	}
	return m[1]
}

// metric is the value of the sample of eventsd's /metrics at addr whose
// line starts with series (a name and its labels), "" when it has none.
func metric(t *testing.T, addr, series string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// waitMetric waits until eventsd's sample series has the value want.
func waitMetric(t *testing.T, addr, series, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := metric(t, addr, series)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("eventsd's %s is %q, want %q", series, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort is a loopback port free now, for a server the page starts on
// a fixed port that another test may hold.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// commandsBin is a directory for PATH holding eventsd (built once per
// test binary, eventsdtest.Binary), kubectl (eventsdtest.Kubectl) and
// the other commands of the module named, built into it: what the pages'
// `go run ./cmd/NAME` become, since go run would build again each time.
func commandsBin(t *testing.T, cmds ...string) string {
	t.Helper()
	dir := pathWith(t, map[string]string{"eventsd": eventsdtest.Binary(t), "kubectl": eventsdtest.Kubectl(t)})
	if len(cmds) == 0 {
		return dir
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, c := range cmds {
		args = append(args, "./cmd/"+c)
	}
	build := exec.Command(buildcache.GoTool(), args...)
	build.Dir = root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %v: %v\n%s", cmds, err, out)
	}
	return dir
}

// line is what a line a block prints must contain, and what it shows.
type line struct {
	what  string
	parts []string
}

// printedInOrder checks that out has, in order, a line containing each
// want's parts.
func printedInOrder(t *testing.T, out string, want []line) {
	t.Helper()
	i := 0
	for _, l := range strings.Split(out, "\n") {
		if i < len(want) && containsAll(l, want[i].parts) {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("the block printed no line with %q (%s), in order:\n%s", want[i].parts, want[i].what, out)
	}
}

// containsAll: s contains every one of parts.
func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// devcluster runs a page's devcluster block in a terminal of its own,
// built once and with kube-apiserver on a free port (--port 0) and the
// events etcd on another (other tests may hold 6443 and 2379), and
// returns the admin configuration of the cluster.kubeconfig it writes
// and the events etcd's port.
func devcluster(t *testing.T, r *reader, block string) (*rest.Config, string) {
	t.Helper()
	kubeapiserver.RequireBinaries(t)
	events := freePort(t)
	r.terminal(replace(t, block, "go run ./cmd/devcluster", "devcluster --port 0 --events-etcd 127.0.0.1:"+events), "Ctrl-C stops everything.")
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(r.dir, "cluster.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, events
}
