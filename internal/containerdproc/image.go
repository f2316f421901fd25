package containerdproc

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// links are the commands the image links to /bin/busybox.
var links = []string{"sh", "sleep", "true", "false", "cat", "echo", "kill", "ls", "env", "date", "hostname", "nc", "nslookup", "wget"}

// checkStatic fails unless path is a statically linked ELF executable
// (one that runs in an image with nothing else in it).
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", path)
		}
	}
	return nil
}

// imageArchive is a docker-save archive of Image and PauseImage: one
// layer holding busybox as /bin/busybox and its links.
func imageArchive(busybox string) ([]byte, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, err
	}
	epoch := time.Unix(0, 0)
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	entries := []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb)), ModTime: epoch},
	}
	for _, h := range entries {
		if err := lw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := lw.Write(bb); err != nil {
		return nil, err
	}
	for _, l := range links {
		if err := lw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	layerID := hex.EncodeToString(layerSum[:])
	type file struct {
		name string
		data []byte
	}
	files := []file{{layerID + "/layer.tar", layer.Bytes()}}
	var manifest []map[string]any
	// Two images of the one layer: busybox, whose default command sleeps,
	// and the pause image every sandbox runs, whose shell (PID 1 of the
	// pod) reaps what it is given and ends at SIGTERM or SIGINT, as the
	// pause program does.
	for _, img := range []struct {
		name string
		cmd  []string
	}{
		{Image, []string{"/bin/sleep", "2147483647"}},
		{PauseImage, []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 2147483647 & wait; done"}},
	} {
		cfg, err := json.Marshal(map[string]any{
			"architecture": runtime.GOARCH,
			"os":           "linux",
			"created":      epoch.UTC().Format(time.RFC3339),
			"config": map[string]any{
				"Env": []string{"PATH=/bin"},
				"Cmd": img.cmd,
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerID}},
		})
		if err != nil {
			return nil, err
		}
		cfgSum := sha256.Sum256(cfg)
		cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
		files = append(files, file{cfgName, cfg})
		manifest = append(manifest, map[string]any{"Config": cfgName, "RepoTags": []string{img.name}, "Layers": []string{layerID + "/layer.tar"}})
	}
	manifestJSON, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	files = append(files, file{"manifest.json", manifestJSON})
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	for _, f := range files {
		if err := w.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// importImage makes Image and imports it into the CRI plugin's namespace
// (k8s.io), unpacked for overlayfs, with ctr.
func (c *Containerd) importImage() error {
	archive, err := imageArchive(c.opts.Busybox)
	if err != nil {
		return fmt.Errorf("containerdproc: making the image: %w", err)
	}
	tarPath := c.path("image.tar")
	if err := os.WriteFile(tarPath, archive, 0o600); err != nil {
		return fmt.Errorf("containerdproc: %w", err)
	}
	defer os.Remove(tarPath)
	out, err := c.ImportImage(tarPath)
	if err != nil {
		return err
	}
	for _, img := range []string{Image, PauseImage} {
		if !bytes.Contains([]byte(out), []byte(img)) {
			return errors.New("containerdproc: ctr images import did not import " + img + ":\n" + out)
		}
	}
	return nil
}

// ImportImage imports the images of an archive (docker save's or an OCI
// layout's tar, as tools/image writes eventsd's) into the CRI plugin's
// namespace (k8s.io), unpacked for overlayfs, with ctr, and returns what
// ctr printed.
func (c *Containerd) ImportImage(tarPath string) (string, error) {
	cmd := exec.Command(c.bin.Ctr(), "--address", c.Socket(), "--namespace", "k8s.io", "images", "import",
		"--snapshotter", "overlayfs", "--local", tarPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("containerdproc: ctr images import %s: %w\n%s", tarPath, err, out)
	}
	return string(out), nil
}
