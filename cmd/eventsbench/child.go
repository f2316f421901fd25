package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// childEnv marks a process as started by run: the test binary, re-executed
// as a child, runs the eventsbench command line instead of its tests.
const childEnv = "EVENTSBENCH_CHILD"

// child is a server process run by the orchestrator.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, once done is closed
	logs *tailBuffer
	// URL is where it serves.
	URL string
}

// startChild starts path with args and waits until a line of its output
// matches urlRE (whose first group is the base URL) and, if readyPath is
// set, until GET readyPath answers 200. The child is in its own process
// group, so that a Ctrl-C at the terminal reaches only the orchestrator,
// which stops it; and it gets SIGKILL if the orchestrator dies without
// stopping it (Pdeathsig). It waits childStartTimeout for each.
func startChild(ctx context.Context, name, path string, args []string, urlRE *regexp.Regexp, readyPath string) (*child, error) {
	return startChildWithin(ctx, childStartTimeout, name, path, args, urlRE, "", readyPath)
}

// childStartTimeout is how long a child may take to serve, and then to be
// ready: an empty store opens in well under a second.
const childStartTimeout = 30 * time.Second

// startChildWithin is startChild waiting up to timeout for each step: an
// eventsd replica over a large etcd builds its index before it serves.
// When what urlRE matched has no scheme (servers that log host:port),
// scheme is put in front.
func startChildWithin(ctx context.Context, timeout time.Duration, name, path string, args []string, urlRE *regexp.Regexp, scheme, readyPath string) (*child, error) {
	c := &child{name: name, done: make(chan struct{}), logs: &tailBuffer{max: 64 << 10}}
	c.cmd = exec.Command(path, args...)
	c.cmd.Env = append(os.Environ(), childEnv+"=1")
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	found := make(chan string, 1)
	var readers sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		readers.Go(func() {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				c.logs.WriteLine(line)
				if m := urlRE.FindStringSubmatch(line); m != nil {
					select {
					case found <- m[1]:
					default:
					}
				}
			}
			_, _ = io.Copy(io.Discard, r)
		})
	}
	go func() {
		readers.Wait() // Wait must follow the reads of the pipes
		c.err = c.cmd.Wait()
		close(c.done)
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case c.URL = <-found:
		if !strings.Contains(c.URL, "://") {
			c.URL = scheme + "://" + c.URL
		}
	case <-c.done:
		return nil, fmt.Errorf("%s exited before serving: %v\n%s", name, c.err, c.logs)
	case <-timer.C:
		c.stop()
		return nil, fmt.Errorf("%s did not start serving within %s\n%s", name, timeout, c.logs)
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
	if readyPath != "" {
		if err := c.waitReady(ctx, readyPath, timeout); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *child) waitReady(ctx context.Context, path string, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(c.URL + path); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.done:
			return fmt.Errorf("%s exited before it was ready: %v\n%s", c.name, c.err, c.logs)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s at %s not ready within %s\n%s", c.name, c.URL, timeout, c.logs)
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited returns an error describing the exit if the child has ended.
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited unexpectedly: %v\n%s", c.name, c.err, c.logs)
	default:
		return nil
	}
}

// stop asks the child to stop (SIGTERM), kills it after 60 seconds, and
// returns an error unless it exited 0 when asked. It may be called again.
func (c *child) stop() error {
	select {
	case <-c.done:
		return c.exitErr()
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		if termed(c.err) {
			// etcd's binary re-raises the signal it handled: asked to
			// stop, it stopped.
			return nil
		}
		return c.exitErr()
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s did not exit within 60s of SIGTERM; killed\n%s", c.name, c.logs)
	}
}

func (c *child) exitErr() error {
	if c.err != nil {
		return fmt.Errorf("%s: %w\n%s", c.name, c.err, c.logs)
	}
	return nil
}

// scrapeMetrics returns the unlabelled samples of a Prometheus text
// exposition at c.URL/metrics: each counter's, gauge's and untyped
// metric's value by its name, and each summary's and histogram's sum and
// count as name_sum and name_count.
func (c *child) scrapeMetrics(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) > 0 {
				continue
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				out[name] = m.GetUntyped().GetValue()
			case dto.MetricType_SUMMARY:
				out[name+"_sum"], out[name+"_count"] = m.GetSummary().GetSampleSum(), float64(m.GetSummary().GetSampleCount())
			case dto.MetricType_HISTOGRAM:
				out[name+"_sum"], out[name+"_count"] = m.GetHistogram().GetSampleSum(), float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out, nil
}

// tailBuffer keeps the last max bytes of a child's output lines.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// WriteLine appends a line, dropping the oldest bytes beyond max.
func (t *tailBuffer) WriteLine(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(append(t.b, line...), '\n')
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
}

// String returns the kept output.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// stopAll stops children, joining their errors.
func stopAll(cs ...*child) error {
	var errs []error
	for _, c := range cs {
		if c != nil {
			errs = append(errs, c.stop())
		}
	}
	return errors.Join(errs...)
}

// stopReverse stops children in the reverse of their start order, so that
// a server stops before the storage it uses (eventsd before its etcd).
func stopReverse(cs []*child) error {
	r := slices.Clone(cs)
	slices.Reverse(r)
	return stopAll(r...)
}

// termed reports whether err is the exit of a process killed by SIGTERM.
func termed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}
