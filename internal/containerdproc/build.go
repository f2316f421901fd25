package containerdproc

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/kubevents/kubevents/internal/buildcache"
)

// containerdModule is the module whose version tools/containerd pins.
const containerdModule = "github.com/containerd/containerd/v2"

// module is tools/containerd: containerd, its runc shim, ctr and crictl,
// built statically without the snapshotters that need cgo or host tools.
// containerd comes last: buildcache renames it into place once the
// others are there, so its presence means a whole build.
var module = &buildcache.Module{
	Dir:       filepath.Join("tools", "containerd"),
	Prefix:    "containerd-",
	VersionOf: containerdModule,
	Tags:      "no_btrfs no_devmapper no_zfs",
	LDFlags: func(version string) string {
		return "-s -w -X " + containerdModule + "/version.Version=" + version
	},
	Commands: []buildcache.Command{
		{Name: "containerd-shim-runc-v2", Package: containerdModule + "/cmd/containerd-shim-runc-v2"},
		{Name: "ctr", Package: containerdModule + "/cmd/ctr"},
		{Name: "crictl", Package: "sigs.k8s.io/cri-tools/cmd/crictl"},
		{Name: "containerd", Package: containerdModule + "/cmd/containerd"},
	},
}

// ErrUnavailable is Build's error when the sources or modules containerd
// is built from cannot be had here (no tools/containerd, no module
// download possible). Tests skip on it.
var ErrUnavailable = errors.New("containerd cannot be built here")

// Binaries is one build of tools/containerd, all in one directory.
type Binaries struct {
	// Dir holds containerd, containerd-shim-runc-v2, ctr and crictl.
	Dir string
	// Version is containerd's module version (tools/containerd/go.mod).
	Version string
}

// Containerd is the containerd daemon.
func (b Binaries) Containerd() string { return filepath.Join(b.Dir, "containerd") }

// Ctr is containerd's own client.
func (b Binaries) Ctr() string { return filepath.Join(b.Dir, "ctr") }

// Crictl is cri-tools' CRI client.
func (b Binaries) Crictl() string { return filepath.Join(b.Dir, "crictl") }

var built struct {
	once sync.Once
	bin  Binaries
	err  error
}

// Build returns the build of tools/containerd in the user cache directory
// (buildcache.Module: one build per sources and toolchain, one builder at
// a time across processes), building it first when there is none: a
// first build takes minutes (`go run ./cmd/devcontainerd --build-only`
// does it ahead of the tests in .ci/run). Once per process.
func Build() (Binaries, error) {
	built.once.Do(func() {
		b, err := module.Build()
		if errors.Is(err, buildcache.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		built.bin, built.err = Binaries{Dir: b.Dir, Version: b.Version}, err
	})
	return built.bin, built.err
}

// Cached reports whether Build would return without building.
func Cached() bool {
	_, ok := module.Cached()
	return ok
}
