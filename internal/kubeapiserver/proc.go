package kubeapiserver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stopTimeout bounds how long a process has to end after SIGTERM before
// it gets SIGKILL, and how long a process may take to end after SIGKILL.
const stopTimeout = 30 * time.Second

// proc is one server process (etcd or kube-apiserver) that can be
// started, stopped, killed and started again with the same arguments, its
// output appended to one log file across runs.
type proc struct {
	name    string
	bin     string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd     // nil until started
	done chan struct{} // closed when cmd has ended
}

// start starts the process; it must not be running.
func (p *proc) start() error {
	if p.running() {
		return fmt.Errorf("%s is running", p.name)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== %s: %s started\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// running reports whether the process runs.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// pid is the process id of the current or last run, 0 before the first.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exited is closed when the current run ends (nil before the first).
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// kill sends SIGKILL, as a crash would, and waits for the end. A process
// not running is left alone.
func (p *proc) kill() error {
	return p.signal(syscall.SIGKILL)
}

// stop sends SIGTERM (a graceful shutdown) and waits for the end,
// killing the process when it takes longer than stopTimeout.
func (p *proc) stop() error {
	err := p.signal(syscall.SIGTERM)
	if err != nil {
		if kerr := p.kill(); kerr != nil {
			return errors.Join(err, kerr)
		}
	}
	return err
}

// signal sends sig and waits up to stopTimeout for the process to end.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("%s (pid %d) did not end within %v of %v", p.name, cmd.Process.Pid, stopTimeout, sig)
	}
}

// tail is the last n lines of the process's log, or why it cannot be read.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
