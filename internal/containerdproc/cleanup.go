package containerdproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoots are the mounted cgroup hierarchies: each v1 controller's
// (and named hierarchy's) directory, and the v2 one.
func cgroupRoots() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var roots []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER
		f := strings.Fields(sc.Text())
		sep := -1
		for i, s := range f {
			if s == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(f) || len(f) < 5 {
			continue
		}
		if t := f[sep+1]; t == "cgroup" || t == "cgroup2" {
			roots = append(roots, f[4])
		}
	}
	return roots
}

// killCgroupProcs kills every process in the cgroups under parent (the
// containers of pods put there), in every hierarchy.
func killCgroupProcs(parent string) {
	for _, root := range cgroupRoots() {
		_ = filepath.WalkDir(filepath.Join(root, parent), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroups removes the cgroup parent of the pods, with what is
// under it (empty once its processes are gone), from every hierarchy.
func removeCgroups(parent string) error {
	var errs []error
	for _, root := range cgroupRoots() {
		top := filepath.Join(root, parent)
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first.
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := rmdirRetry(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("containerdproc: removing cgroups: %w", errors.Join(errs...))
	}
	return nil
}

// rmdirRetry removes a cgroup directory, waiting up to a second for the
// kernel to let go of processes that just exited.
func rmdirRetry(d string) error {
	var err error
	for range 20 {
		if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("rmdir %s: %w", d, err)
}

// UnmountUnder unmounts everything mounted under dir, deepest first
// (overlay snapshots, sandbox shm, container rootfs).
func UnmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("containerdproc: %w", err)
	}
	var points []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("containerdproc: %w", errors.Join(errs...))
	}
	return nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// killNamed kills every process whose command line names dir (the shims
// of this containerd, started with its socket's path) and waits up to
// 5 s for them to go.
func killNamed(dir string) {
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		pids = append(pids, pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && bytes.Contains(st, []byte(") Z ")) {
				break // a zombie: gone but for its parent's wait
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// makeCgroups creates the cgroup dir in every hierarchy, so that a
// kubelet can take it as its cgroupRoot (which must exist). In the v1
// cpuset hierarchy a new cgroup has no CPUs or memory nodes until given
// its parent's.
func makeCgroups(dir string) error {
	for _, root := range cgroupRoots() {
		p := filepath.Join(root, dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("containerdproc: creating cgroup %s: %w", p, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(p), f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if cur, _ := os.ReadFile(filepath.Join(p, f)); len(bytes.TrimSpace(cur)) == 0 {
				if err := os.WriteFile(filepath.Join(p, f), parent, 0o644); err != nil {
					return fmt.Errorf("containerdproc: setting %s of %s: %w", f, p, err)
				}
			}
		}
	}
	return nil
}
