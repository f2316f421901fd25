package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// sumsFile holds the checksums of the other artifacts.
const sumsFile = "SHA256SUMS"

// archiveFile is one file of an archive.
type archiveFile struct {
	// name is its name in the archive; path where it is read from.
	name, path string
	mode       int64
}

func names(files []archiveFile) []string {
	var n []string
	for _, f := range files {
		n = append(n, f.name)
	}
	return n
}

// writeArchive writes files to the gzip-compressed tar out, at its top,
// in the order given, each owned by root with time epoch; the same files
// give the same bytes. out appears only complete.
func writeArchive(out string, files []archiveFile, epoch time.Time) error {
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".writing-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, a := range files {
		if err := addFile(tw, a, epoch); err != nil {
			return fmt.Errorf("archive %s: %w", filepath.Base(out), err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

func addFile(tw *tar.Writer, a archiveFile, epoch time.Time) error {
	src, err := os.Open(a.path)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", a.path)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: a.name, Mode: a.mode, Size: fi.Size(), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}

// writeSums writes SHA256SUMS in dir: a line "<hex>  <name>" for every
// other regular file in it, in name order, as sha256sum writes and checks
// (sha256sum -c SHA256SUMS). It returns what it wrote.
func writeSums(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != sumsFile {
			files = append(files, e.Name())
		}
	}
	slices.Sort(files)
	for _, name := range files {
		sum, err := fileSum(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%x  %s\n", sum, name)
	}
	if err := os.WriteFile(filepath.Join(dir, sumsFile), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return b.String(), nil
}

func fileSum(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("checksum of %s: %w", p, err)
	}
	return h.Sum(nil), nil
}
