package buildcache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ErrUnavailable is Module.Build's error when the module's sources or the
// modules it needs cannot be had here (no clone of the repository, no
// module download possible). Tests skip on it; any other build failure is
// a defect of the tools module.
var ErrUnavailable = errors.New("cannot be built here")

// Command is one binary a Module builds: its file name and main package.
type Command struct {
	Name, Package string
}

// Module is a tools/ module of the repository that pins upstream commands
// (tools/kubernetes: the kubelet and the controllers; tools/cni: the CNI
// plugins), built unchanged, statically (CGO_ENABLED=0) and -trimpath,
// into one directory of the user cache per sources and toolchain.
type Module struct {
	// Dir is the module's directory relative to the repository root.
	Dir string
	// Prefix names its cached builds (Prefix + version + "-" + key).
	Prefix string
	// VersionOf is the module path whose required version names the
	// build (Binaries.Version).
	VersionOf string
	// Commands are the binaries built. The last one is put in place last
	// (buildcache.Get renames it), so its presence means a whole build.
	Commands []Command
	// LDFlags are the linker flags for a version ("-s -w" when nil).
	LDFlags func(version string) string
	// Tags are the build tags (go build -tags), if any.
	Tags string

	once sync.Once
	bin  Binaries
	err  error
}

// Binaries is one build of a Module, every command in one directory.
type Binaries struct {
	// Dir holds the commands.
	Dir string
	// Version is Module.VersionOf's version in the module's go.mod.
	Version string
}

// Path is the named command's binary.
func (b Binaries) Path(name string) string { return filepath.Join(b.Dir, name) }

// located is where a build of the module is, or would be.
type located struct {
	src, version, key string
}

func (m *Module) ldflags(version string) string {
	if m.LDFlags == nil {
		return "-s -w"
	}
	return m.LDFlags(version)
}

func (m *Module) last() string { return m.Commands[len(m.Commands)-1].Name }

func (m *Module) locate() (located, error) {
	src, err := ModuleDir(m.Dir)
	if err != nil {
		return located{}, fmt.Errorf("%s %w: %w", m.Dir, ErrUnavailable, err)
	}
	goMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return located{}, fmt.Errorf("%s %w: %w", m.Dir, ErrUnavailable, err)
	}
	version, err := RequiredVersion(goMod, m.VersionOf)
	if err != nil {
		return located{}, fmt.Errorf("%s: %w", m.Dir, err)
	}
	var extra strings.Builder
	extra.WriteString(m.ldflags(version))
	if m.Tags != "" {
		extra.WriteString(" tags=" + m.Tags)
	}
	for _, c := range m.Commands {
		fmt.Fprintf(&extra, " %s=%s", c.Name, c.Package)
	}
	key, err := ModuleKey(src, []string{"go.mod", "go.sum"}, extra.String())
	if err != nil {
		return located{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return located{src: src, version: version, key: version + "-" + key}, nil
}

// Cached reports whether Build would return without building, and the
// version it builds.
func (m *Module) Cached() (version string, ok bool) {
	l, err := m.locate()
	if err != nil {
		return "", false
	}
	return l.version, isBuilt(filepath.Join(Root(), m.Prefix+l.key, m.last()))
}

// Build returns the module's build in the user cache directory, building
// it first when there is none (one builder at a time across processes;
// older builds removed). Once per Module value. Errors wrap ErrUnavailable
// when the sources or modules cannot be had.
func (m *Module) Build() (Binaries, error) {
	m.once.Do(func() { m.bin, m.err = m.build() })
	return m.bin, m.err
}

func (m *Module) build() (Binaries, error) {
	l, err := m.locate()
	if err != nil {
		return Binaries{}, err
	}
	path, err := Get(Root(), m.Prefix, l.key, m.last(), func(out string) error {
		return m.goBuild(l, filepath.Dir(out), out)
	})
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{Dir: filepath.Dir(path), Version: l.version}, nil
}

// goBuild builds every command into dir, the last to out. First the
// packages are resolved (downloading what the module cache lacks), so
// that modules that cannot be had (ErrUnavailable) are told apart from a
// failure to compile them.
func (m *Module) goBuild(l located, dir, out string) error {
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(GoTool(), args...)
		cmd.Dir = l.src
		// Static binaries, as upstream's releases; no C compiler needed.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		return cmd.CombinedOutput()
	}
	pkgs := make([]string, len(m.Commands))
	for i, c := range m.Commands {
		pkgs[i] = c.Package
	}
	tags := []string{"-tags", m.Tags}
	args := append(append([]string{"list"}, tags...), "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}")
	args = append(args, pkgs...)
	if b, err := run(args...); err != nil {
		return fmt.Errorf("%s %w: the modules cannot be had (go list -deps in %s: %w):\n%s", m.Dir, ErrUnavailable, l.src, err, LastLines(b, 30))
	}
	for _, c := range m.Commands {
		dst := filepath.Join(dir, c.Name)
		if c.Name == m.last() {
			dst = out
		}
		if b, err := run(append(append([]string{"build"}, tags...), "-trimpath", "-ldflags", m.ldflags(l.version), "-o", dst, c.Package)...); err != nil {
			return fmt.Errorf("buildcache: go build %s in %s: %w\n%s", c.Package, l.src, err, LastLines(b, 60))
		}
	}
	return nil
}

// RequiredVersion is the version of module that goMod requires.
func RequiredVersion(goMod []byte, module string) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("go.mod requires no %s", module)
}

// LastLines is the last n lines of b.
func LastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
