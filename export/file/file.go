// Package file is the export sink that appends records to a file as JSON
// lines (export.Record's JSON form, one record a line), rotating it by
// size.
//
// # Durability
//
// Send writes the batch and fsyncs the file before it returns nil, so an
// acknowledged batch survives a crash of the process or the machine. A
// batch that fails is sent again whole, so records written before the
// failure appear twice (the same idempotencyKey). A write that fails is
// cut off again (the file truncated to its size before it), so the file
// does not keep a torn line; if the process dies mid-write, the torn last
// line is cut off when the file is next opened (its batch was not
// acknowledged, so it is sent again). A file whose last line is
// unfinished and does not start as a record does is not one this sink
// wrote: opening it fails rather than cut it. After a failed fsync the file is
// closed and opened again by the next Send: Linux may have dropped the
// unwritten pages, and a second fsync would not say so.
//
// # Rotation
//
// Before a record would make the file exceed MaxSizeBytes, the file is
// rotated, between batches or in the middle of one: it is fsynced and
// renamed to <path>.1, <path>.1 to <path>.2 and so on, the oldest beyond
// MaxBackups removed, and a new file is started. A record longer than
// MaxSizeBytes gets a file of its own. Backups beyond MaxBackups left by
// an earlier configuration are not touched.
//
// # Files
//
// New creates missing parent directories (mode 0750) and opens the file
// for appending, creating it with mode 0640 (the usual mode of log files:
// a log shipper in the file's group may read it); an existing file keeps
// its mode and contents.
package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubevents/kubevents/export"
)

// Defaults and limits.
const (
	// DefaultMaxSizeBytes is the default size at which the file rotates.
	DefaultMaxSizeBytes = 100 << 20
	// DefaultMaxBackups is the default number of rotated files kept.
	DefaultMaxBackups = 5
	// MaxMaxBackups bounds MaxBackups: rotation renames every backup.
	MaxMaxBackups = 1000
	// FileMode is the mode of a file the sink creates.
	FileMode fs.FileMode = 0o640
	// DirMode is the mode of directories the sink creates.
	DirMode fs.FileMode = 0o750
	// tailChunk is how much of the file's end is read at a time to find
	// its last line break when it is opened.
	tailChunk = 4096
	// maxTornLine bounds the search for the start of a torn last line:
	// far beyond any event's record (an object is at most a few MiB).
	maxTornLine = 16 << 20
)

// Config configures a file sink. It is part of the export configuration
// file, so its fields have JSON (and YAML) names.
type Config struct {
	// Path is the file records are appended to. Required.
	Path string `json:"path"`
	// MaxSizeBytes is the size the file does not grow beyond (unless by
	// a single record longer than it); then it is rotated. Default
	// DefaultMaxSizeBytes (100 MiB).
	MaxSizeBytes int64 `json:"maxSizeBytes,omitempty"`
	// MaxBackups is how many rotated files (<path>.1 the newest ...
	// <path>.N the oldest) are kept; 0 keeps none. Default
	// DefaultMaxBackups (5); at most MaxMaxBackups.
	MaxBackups *int `json:"maxBackups,omitempty"`
}

// Validate checks cfg; path is where cfg sits in the configuration.
func (cfg Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if cfg.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), "the file to write"))
	} else if filepath.Base(cfg.Path) == "." || filepath.Base(cfg.Path) == string(filepath.Separator) || os.IsPathSeparator(cfg.Path[len(cfg.Path)-1]) {
		errs = append(errs, field.Invalid(path.Child("path"), cfg.Path, "names a directory, not a file"))
	}
	if cfg.MaxSizeBytes < 0 {
		errs = append(errs, field.Invalid(path.Child("maxSizeBytes"), cfg.MaxSizeBytes, "must not be negative"))
	}
	if cfg.MaxBackups != nil && (*cfg.MaxBackups < 0 || *cfg.MaxBackups > MaxMaxBackups) {
		errs = append(errs, field.Invalid(path.Child("maxBackups"), *cfg.MaxBackups, fmt.Sprintf("must be between 0 and %d", MaxMaxBackups)))
	}
	return errs
}

// FS is what the sink needs of a file system; tests inject faults with it.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	MkdirAll(path string, perm fs.FileMode) error
}

// File is an open file of an FS (*os.File is one).
type File interface {
	io.Writer
	io.ReaderAt
	Stat() (fs.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// OS is the operating system's file system.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil *os.File would not be a nil File
	}
	return f, nil
}
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// Options are a sink's dependencies, set by code rather than configuration.
type Options struct {
	// FS is the file system; default OS().
	FS FS
}

// Sink appends records to a file. It implements export.Sink.
type Sink struct {
	path       string
	maxSize    int64
	maxBackups int
	fs         FS

	f    File  // nil after a failure that needs the file opened again
	size int64 // the file's size: the end of its last whole line
	buf  bytes.Buffer
}

var _ export.Sink = (*Sink)(nil)

// New returns a sink appending to cfg.Path, which it opens (and creates,
// with its directories) now, so that a path it cannot write fails here.
func New(cfg Config, opts Options) (*Sink, error) {
	if errs := cfg.Validate(field.NewPath("file")); len(errs) > 0 {
		return nil, fmt.Errorf("file sink: %w", errs.ToAggregate())
	}
	s := &Sink{path: filepath.Clean(cfg.Path), maxSize: cfg.MaxSizeBytes, maxBackups: DefaultMaxBackups, fs: opts.FS}
	if s.maxSize == 0 {
		s.maxSize = DefaultMaxSizeBytes
	}
	if cfg.MaxBackups != nil {
		s.maxBackups = *cfg.MaxBackups
	}
	if s.fs == nil {
		s.fs = OS()
	}
	if err := s.fs.MkdirAll(filepath.Dir(s.path), DirMode); err != nil {
		return nil, fmt.Errorf("file sink: creating the directory of %s: %w", s.path, err)
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

// open opens the file for appending and cuts off a torn last line.
func (s *Sink) open() error {
	f, err := s.fs.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, FileMode)
	if err != nil {
		return fmt.Errorf("file sink: %w", err) // *PathError names the file
	}
	fail := func(what string, err error) error {
		_ = f.Close()
		return fmt.Errorf("file sink: %s %s: %w", what, s.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail("stat", err)
	}
	if !st.Mode().IsRegular() {
		return fail("opening", errors.New("not a regular file"))
	}
	end, err := lastLineEnd(f, st.Size())
	if err != nil {
		return fail("reading the end of", err)
	}
	if end < st.Size() {
		// Only a torn record of ours is cut: a file that ends in
		// anything else is not one this sink wrote.
		head := make([]byte, min(int64(len(recordStart)), st.Size()-end))
		if _, err := f.ReadAt(head, end); err != nil && !errors.Is(err, io.EOF) {
			return fail("reading the end of", err)
		}
		if !strings.HasPrefix(recordStart, string(head)) {
			return fail("opening", fmt.Errorf("the file's last %d bytes are neither a whole line nor a torn record: not a file of this sink?", st.Size()-end))
		}
		if err := f.Truncate(end); err != nil {
			return fail("cutting a torn last line off", err)
		}
		if err := f.Sync(); err != nil {
			return fail("fsync", err)
		}
	}
	s.f, s.size = f, end
	return nil
}

// recordStart is how every line of the file starts: export.Record's JSON
// form begins with its idempotency key.
const recordStart = `{"idempotencyKey":`

// lastLineEnd returns the offset just past the last '\n' among the first
// size bytes of f, or 0 if there is none. It looks back at most
// maxTornLine bytes, and fails if it finds no line break there.
func lastLineEnd(f io.ReaderAt, size int64) (int64, error) {
	buf := make([]byte, tailChunk)
	for end := size; end > 0; {
		if size-end >= maxTornLine {
			return 0, fmt.Errorf("no line break in the last %d bytes", size-end)
		}
		start := max(end-tailChunk, 0)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// Send appends batch, one line a record, and fsyncs the file. See the
// package documentation for failures and rotation.
func (s *Sink) Send(ctx context.Context, batch []export.Record) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	if len(batch) == 0 {
		return nil
	}
	if s.f == nil {
		if err := s.open(); err != nil {
			return err
		}
	}
	s.buf.Reset()
	for _, r := range batch {
		start := s.buf.Len()
		if err := r.WriteJSON(&s.buf); err != nil {
			s.buf.Truncate(start)
			return fmt.Errorf("file sink %s: encoding record %s: %w: %w", s.path, r.Key, export.ErrRejected, err)
		}
		s.buf.WriteByte('\n')
		if s.size+int64(start) > 0 && s.size+int64(s.buf.Len()) > s.maxSize {
			// The line does not fit: write what does, rotate, and
			// start the new file with the line.
			line := append([]byte(nil), s.buf.Bytes()[start:]...)
			s.buf.Truncate(start)
			if err := s.flush(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("file sink %s: %w", s.path, err)
			}
			if err := s.rotate(); err != nil {
				return err
			}
			s.buf.Write(line)
		}
	}
	if err := s.flush(); err != nil {
		return err
	}
	return s.sync()
}

// flush writes the buffered lines, cutting a failed write off again.
func (s *Sink) flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	n, err := s.f.Write(s.buf.Bytes())
	if err == nil && n < s.buf.Len() {
		err = io.ErrShortWrite
	}
	if err != nil {
		if terr := s.f.Truncate(s.size); terr != nil {
			// The file may now end in a torn line: open it again,
			// which cuts it off, before writing more.
			s.drop()
			return fmt.Errorf("file sink: writing %s: %w (and cutting the torn write off: %v)", s.path, err, terr)
		}
		return fmt.Errorf("file sink: writing %s: %w", s.path, err)
	}
	s.size += int64(n)
	s.buf.Reset()
	return nil
}

func (s *Sink) sync() error {
	if err := s.f.Sync(); err != nil {
		s.drop()
		return fmt.Errorf("file sink: fsync %s: %w", s.path, err)
	}
	return nil
}

// drop closes the file after a failure; the next Send opens it again.
func (s *Sink) drop() {
	_ = s.f.Close()
	s.f = nil
}

// rotate makes the current file the newest backup and opens a new one.
func (s *Sink) rotate() error {
	if err := s.sync(); err != nil {
		return err
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("file sink: closing %s to rotate it: %w", s.path, err)
	}
	if s.maxBackups == 0 {
		if err := s.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: rotating: %w", err)
		}
	} else {
		if err := s.fs.Remove(s.backup(s.maxBackups)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: removing the oldest backup: %w", err)
		}
		for i := s.maxBackups - 1; i >= 1; i-- {
			if err := s.fs.Rename(s.backup(i), s.backup(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("file sink: rotating: %w", err)
			}
		}
		if err := s.fs.Rename(s.path, s.backup(1)); err != nil {
			return fmt.Errorf("file sink: rotating: %w", err)
		}
	}
	if err := s.open(); err != nil {
		return err
	}
	// Make the renames and the new file durable before writing to it.
	return s.syncDir()
}

func (s *Sink) syncDir() error {
	d, err := s.fs.OpenFile(filepath.Dir(s.path), os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("file sink: opening the directory of %s: %w", s.path, err)
	}
	err = d.Sync()
	_ = d.Close()
	if err != nil {
		return fmt.Errorf("file sink: fsync the directory of %s: %w", s.path, err)
	}
	return nil
}

func (s *Sink) backup(i int) string {
	return s.path + "." + strconv.Itoa(i)
}

// Close fsyncs and closes the file.
func (s *Sink) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f = nil
	if err != nil {
		return fmt.Errorf("file sink: closing %s: %w", s.path, err)
	}
	return nil
}
