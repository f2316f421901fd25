// Package containerdproc runs a real containerd 2.x for tests: built from
// tools/containerd (containerd, its runc shim, ctr and crictl) into the
// user cache directory, started on a socket under a private directory
// with its CRI plugin configured as on a kubelet's node without CNI
// (cgroupfs, overlayfs, restrict_oom_score_adj, host-network pods), with
// a busybox image made locally from the host's busybox-static and
// imported, so that nothing is pulled. Stop ends every container, shim
// and mount it made.
package containerdproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubevents/kubevents/internal/buildcache"
	"github.com/kubevents/kubevents/internal/syncbuf"
)

// Image is the image containers run: busybox-static as /bin/busybox,
// with /bin/sh, /bin/sleep and other commands linked to it.
const Image = "docker.io/kubevents/busybox:static"

// PauseImage is the sandbox image every pod runs, pinned in the CRI
// plugin's configuration: Image's layer with a shell for command that
// waits, reaps and ends at SIGTERM, as the pause program does.
const PauseImage = "docker.io/kubevents/pause:static"

// Options configures Start. Zero fields take the defaults.
type Options struct {
	// Binaries is the build to run (Build()'s).
	Binaries *Binaries
	// Runc is the OCI runtime binary (runc on PATH, or /usr/sbin/runc).
	Runc string
	// Busybox is a statically linked busybox for the image (busybox on
	// PATH, or /bin/busybox).
	Busybox string
	// ReadyTimeout bounds each start, until the CRI plugin answers
	// (DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// Logf, when set, gets a line for each start and stop (testing.T's
	// Logf).
	Logf func(format string, args ...any)
	// NetNS, when set, is the path of a network namespace (/run/netns/X)
	// containerd, its shims and the CNI plugins run in: that of a node
	// (internal/nodecluster). Empty: the host's.
	NetNS string
	// CNI, when set, gives pods a network of their own through CNI
	// plugins (a node's); nil: every pod uses the host's network.
	CNI *CNI
}

// CNI is where containerd's CRI plugin finds the CNI plugins and their
// network configuration.
type CNI struct {
	// BinDir holds the plugins (bridge, host-local, loopback, portmap).
	BinDir string
	// ConfDir holds the network configuration (a .conflist).
	ConfDir string
}

// DefaultReadyTimeout is Options.ReadyTimeout's default.
const DefaultReadyTimeout = 30 * time.Second

// ErrCannotRun wraps the reason containerd cannot run on this machine
// (not root, no overlayfs, no cgroups, no runc or busybox-static); tests
// skip with it.
var ErrCannotRun = errors.New("containerd cannot run here")

// Containerd is one containerd, started by Start.
type Containerd struct {
	bin    Binaries
	opts   Options
	dir    string // private root of everything it makes
	cgroup string // cgroup parent of its pods, under every hierarchy
	logs   syncbuf.Buffer

	cmd    *exec.Cmd
	exited chan error
}

// CanRun says why containerd cannot run here, or nil: it needs root,
// overlayfs, mounted cgroups, runc and a static busybox.
func CanRun(opts Options) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: it needs root (running as uid %d)", ErrCannotRun, os.Geteuid())
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\toverlay\n") {
		return fmt.Errorf("%w: the kernel has no overlayfs (no overlay in /proc/filesystems; modprobe overlay)", ErrCannotRun)
	}
	if len(cgroupRoots()) == 0 {
		return fmt.Errorf("%w: no cgroup hierarchy is mounted under /sys/fs/cgroup", ErrCannotRun)
	}
	o := opts.withDefaults()
	if o.Runc == "" {
		return fmt.Errorf("%w: runc is not installed (apt-get install runc; crun 1.8 fails with \"unknown version specified\")", ErrCannotRun)
	}
	if o.Busybox == "" {
		return fmt.Errorf("%w: busybox is not installed (apt-get install busybox-static)", ErrCannotRun)
	}
	if err := checkStatic(o.Busybox); err != nil {
		return fmt.Errorf("%w: %w (apt-get install busybox-static)", ErrCannotRun, err)
	}
	return nil
}

func lookPath(name string, fallbacks ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, f := range fallbacks {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			return f
		}
	}
	return ""
}

func (o Options) withDefaults() Options {
	if o.Runc == "" {
		o.Runc = lookPath("runc", "/usr/sbin/runc", "/usr/bin/runc")
	}
	if o.Busybox == "" {
		o.Busybox = lookPath("busybox", "/bin/busybox", "/usr/bin/busybox")
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// config is containerd 2.x's configuration (version 3): private root,
// state and sockets; the CRI plugin with overlayfs, runc under cgroupfs
// with its state in the private directory, OOM score adjustments
// restricted (no CAP_SYS_RESOURCE needed), the local image pinned as the
// sandbox image, pods' network namespaces under the state directory; no
// CNI (every pod uses the host's network) unless cniConfig is added.
const config = `version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[6]q
        Root = %[7]q
        SystemdCgroup = false
`

// cniConfig is the CRI plugin's CNI section: the plugins' directory and
// the network configuration's, one network.
const cniConfig = `  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[1]q]
    conf_dir = %[2]q
    max_conf_num = 1
`

// Start builds (or finds) containerd, checks that it can run, makes its
// private directory and image, and starts it, returning once its CRI
// plugin answers. Stop must be called (also after a failed start, when
// the returned value is not nil).
func Start(opts Options) (*Containerd, error) {
	opts = opts.withDefaults()
	if err := CanRun(opts); err != nil {
		return nil, err
	}
	if opts.Binaries == nil {
		b, err := Build()
		if err != nil {
			return nil, err
		}
		opts.Binaries = &b
	}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "ctd2-")
	if err != nil {
		return nil, fmt.Errorf("containerdproc: %w", err)
	}
	c := &Containerd{bin: *opts.Binaries, opts: opts, dir: dir, cgroup: "/kubevents-" + filepath.Base(dir)}
	cfg := fmt.Sprintf(config, c.path("root"), c.path("state"), c.Socket(), c.path("ttrpc.sock"), PauseImage,
		opts.Runc, c.path("runc"))
	if opts.CNI != nil {
		cfg += fmt.Sprintf(cniConfig, opts.CNI.BinDir, opts.CNI.ConfDir)
	}
	if err := os.WriteFile(c.path("config.toml"), []byte(cfg), 0o600); err != nil {
		return c, fmt.Errorf("containerdproc: %w", err)
	}
	if err := makeCgroups(c.cgroup); err != nil {
		return c, err
	}
	if err := c.start(); err != nil {
		return c, err
	}
	if err := c.importImage(); err != nil {
		return c, err
	}
	return c, nil
}

func (c *Containerd) path(name string) string { return filepath.Join(c.dir, name) }

// Socket is the path of containerd's socket (CRI and its own API).
func (c *Containerd) Socket() string { return c.path("containerd.sock") }

// Endpoint is the socket as a CRI endpoint URL.
func (c *Containerd) Endpoint() string { return "unix://" + c.Socket() }

// Version is the containerd version running.
func (c *Containerd) Version() string { return c.bin.Version }

// CgroupParent is the cgroup, in every hierarchy, its pods should be put
// under (LinuxPodSandboxConfig.CgroupParent), so that Stop removes them.
func (c *Containerd) CgroupParent(podUID string) string { return c.cgroup + "/pod" + podUID }

// CgroupRoot is the cgroup, in every hierarchy, under which Stop removes
// what is left: a kubelet's cgroupRoot on this containerd's node.
func (c *Containerd) CgroupRoot() string { return c.cgroup }

// ContainerRootfs is the root filesystem of a created container, as its
// shim mounted it: reachable from the host while containerd is down.
func (c *Containerd) ContainerRootfs(id string) string {
	return filepath.Join(c.dir, "state", "io.containerd.runtime.v2.task", "k8s.io", id, "rootfs")
}

// Logs is what containerd wrote to its output so far, over every start.
func (c *Containerd) Logs() string { return c.logs.String() }

// Binaries is the build it runs.
func (c *Containerd) Binaries() Binaries { return c.bin }

func (c *Containerd) start() error {
	cmd := exec.Command(c.bin.Containerd(), "--config", c.path("config.toml"), "--log-level", "info")
	if c.opts.NetNS != "" {
		// nsenter execs containerd: the process is containerd's.
		cmd = exec.Command("nsenter", "--net="+c.opts.NetNS, "--", c.bin.Containerd(), "--config", c.path("config.toml"), "--log-level", "info")
	}
	// The shim is found on PATH.
	cmd.Env = append(os.Environ(), "PATH="+c.bin.Dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = &c.logs, &c.logs
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("containerdproc: starting containerd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c.cmd, c.exited = cmd, exited

	conn, err := grpc.NewClient("unix://"+c.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("containerdproc: %w", err)
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	begun := time.Now()
	deadline := begun.Add(c.opts.ReadyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := client.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			c.opts.Logf("containerd %s (CRI %s) ready on %s in %v", v.RuntimeVersion, v.RuntimeApiVersion, c.Socket(),
				time.Since(begun).Round(time.Millisecond))
			return nil
		}
		select {
		case werr := <-exited:
			exited <- werr
			return fmt.Errorf("containerdproc: containerd exited: %v\n%s", werr, buildcache.LastLines([]byte(c.logs.String()), 40))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerdproc: containerd's CRI plugin did not answer within %v: %w\n%s", c.opts.ReadyTimeout, err,
				buildcache.LastLines([]byte(c.logs.String()), 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PID is the containerd process's ID, 0 when it does not run.
func (c *Containerd) PID() int {
	if !c.Running() {
		return 0
	}
	return c.cmd.Process.Pid
}

// Running reports whether the containerd process runs.
func (c *Containerd) Running() bool {
	if c.cmd == nil {
		return false
	}
	select {
	case err := <-c.exited:
		c.exited <- err
		return false
	default:
		return true
	}
}

// Halt stops the containerd process (SIGTERM, SIGKILL after 20 s) and
// leaves its containers running under their shims, as a containerd
// restart on a node does.
func (c *Containerd) Halt() {
	if !c.Running() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
	c.opts.Logf("containerd halted")
}

// Resume starts the containerd process again after Halt, on the same
// socket and state, and returns once its CRI plugin answers.
func (c *Containerd) Resume() error {
	if c.Running() {
		return errors.New("containerdproc: containerd is running")
	}
	return c.start()
}

// Restart is Halt then Resume.
func (c *Containerd) Restart() error {
	c.Halt()
	return c.Resume()
}

// Stop ends everything Start made: it removes every pod sandbox (which
// stops their containers) through CRI while containerd runs, stops
// containerd, kills any shim or container process left, unmounts what is
// mounted under its directory, removes its cgroups and its directory. The
// error reports what could not be cleaned up.
func (c *Containerd) Stop() error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.Running() {
		if err := c.removeAllPods(); err != nil {
			errs = append(errs, err)
		}
	}
	c.Halt()
	// Shims (and so their containers) left by a failed removal, or by a
	// Halt without Resume: every process whose command line names the
	// private directory.
	killNamed(c.dir)
	killCgroupProcs(c.cgroup)
	errs = append(errs, UnmountUnder(c.dir), removeCgroups(c.cgroup))
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("containerdproc: removing %s: %w", c.dir, err))
	}
	return errors.Join(errs...)
}

func (c *Containerd) removeAllPods() error {
	rt, closeRT, err := c.Dial()
	if err != nil {
		return err
	}
	defer closeRT()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("containerdproc: listing sandboxes to remove: %w", err)
	}
	var errs []error
	// Each pod in its own time: a busy machine takes seconds per pod, and
	// what is not removed in time is killed and unmounted by Stop anyway.
	for _, sb := range resp.Items {
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := rt.StopPodSandbox(pctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.Id, err))
		}
		if _, err := rt.RemovePodSandbox(pctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", sb.Id, err))
		}
		cancel()
	}
	if len(errs) > 0 {
		return fmt.Errorf("containerdproc: %w", errors.Join(errs...))
	}
	return nil
}

// Dial connects a CRI runtime client to containerd.
func (c *Containerd) Dial() (runtimeapi.RuntimeServiceClient, func(), error) {
	conn, err := grpc.NewClient(c.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("containerdproc: %w", err)
	}
	return runtimeapi.NewRuntimeServiceClient(conn), func() { conn.Close() }, nil
}

// Crictl runs crictl against this containerd and returns its output.
func (c *Containerd) Crictl(args ...string) (string, error) {
	cmd := exec.Command(c.bin.Crictl(), append([]string{"--runtime-endpoint", c.Endpoint(), "--image-endpoint", c.Endpoint()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("containerdproc: crictl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
