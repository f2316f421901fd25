package pebblestore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// presence is an in-memory multiset of 32-bit fingerprints of the stored
// object keys, owned by the committer. A key whose fingerprint is absent is
// certainly not stored, so creating it (the overwhelmingly common write)
// needs no read of the database; a present fingerprint only means "maybe"
// (a 32-bit fingerprint of a new key matches one of a million stored ones
// about once in 4,000 creates) and the committer reads the key.
//
// It is an open-addressing table with linear probing and backward-shift
// deletion, holding one uint32 per stored key at most 3/4 full: about 8 MiB
// for a million events, where a Go map of 64-bit hashes cost several times
// that in RSS. A key stored twice under one fingerprint is held twice, so
// removing one keeps the other.
//
// Fingerprints are xxhash with a random seed: unpredictable to clients
// (who choose event names), yet a set saved with its seed (savePresence)
// is valid in the next process, so a clean restart need not rebuild it.
type presence struct {
	seed  uint64
	slots []uint32 // 0: empty
	n     int
	// unknown: the set could not be built; every key may be present.
	unknown bool
}

const presenceMinSlots = 1024

func newPresence(expected int) *presence {
	size := presenceMinSlots
	for size*3/4 < expected {
		size *= 2
	}
	return &presence{seed: rand.Uint64(), slots: make([]uint32, size)}
}

func (p *presence) fingerprint(key []byte) uint32 {
	var d xxhash.Digest
	d.ResetWithSeed(p.seed)
	_, _ = d.Write(key)
	f := uint32(d.Sum64())
	if f == 0 {
		f = 1
	}
	return f
}

func (p *presence) mask() uint32 { return uint32(len(p.slots) - 1) }

func (p *presence) mayContain(key []byte) bool {
	if p.unknown {
		return true
	}
	f, m := p.fingerprint(key), p.mask()
	for i := f & m; p.slots[i] != 0; i = (i + 1) & m {
		if p.slots[i] == f {
			return true
		}
	}
	return false
}

func (p *presence) add(key []byte) {
	if p.unknown {
		return
	}
	if (p.n+1)*4 > len(p.slots)*3 {
		p.grow()
	}
	p.insert(p.fingerprint(key))
}

func (p *presence) insert(f uint32) {
	m := p.mask()
	i := f & m
	for p.slots[i] != 0 {
		i = (i + 1) & m
	}
	p.slots[i] = f
	p.n++
}

func (p *presence) grow() {
	old := p.slots
	p.slots, p.n = make([]uint32, 2*len(old)), 0
	for _, f := range old {
		if f != 0 {
			p.insert(f)
		}
	}
}

func (p *presence) remove(key []byte) {
	if p.unknown {
		return
	}
	f, m := p.fingerprint(key), p.mask()
	i := f & m
	for ; p.slots[i] != f; i = (i + 1) & m {
		if p.slots[i] == 0 {
			return // not held: nothing to do
		}
	}
	// Backward-shift deletion: move later entries of the cluster into the
	// hole unless that would put them before their home slot.
	for j := i; ; {
		j = (j + 1) & m
		g := p.slots[j]
		if g == 0 {
			break
		}
		home := g & m
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			p.slots[i], i = g, j
		}
	}
	p.slots[i] = 0
	p.n--
}

// loadPresence fills the set from the TTL queue, which holds exactly one
// small entry per stored object, so no object value is read; it counts
// the objects of each namespace on the way.
func loadPresence(db *pebble.DB, expected int64) (*presence, map[string]int64, error) {
	p := newPresence(int(expected))
	namespaces := map[string]int64{}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixExpiry}, UpperBound: []byte{prefixExpiry + 1}})
	if err != nil {
		return nil, nil, err
	}
	key := make([]byte, 0, 128)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) <= 9 {
			continue
		}
		key = append(append(key[:0], prefixObject), k[9:]...)
		p.add(key)
		if i := bytes.IndexByte(k[9:], '/'); i >= 0 {
			namespaces[string(k[9:9+i])]++
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, nil, err
	}
	return p, namespaces, it.Close()
}

// presenceFile is where Close saves the presence set and the namespace
// counts (savePresence), in the data directory, for the next Open: at 10M
// events rebuilding them scans 10M TTL-queue entries, most of a restart's
// time. The file names the revision it was saved at; Open uses it only if
// that is the revision the database holds (anything written after the
// save moves the revision) and removes it before any write, so a crash
// later can never leave a stale file that matches.
const presenceFile = "PRESENCE"

// presenceMagic starts the file; the version is its last byte.
var presenceMagic = []byte("kubevents-presence\x00\x01")

// savePresence writes p and the namespace counts, at revision rev, to
// presenceFile in dir: to a temporary file, synced, then renamed.
func savePresence(fs vfs.FS, dir string, p *presence, namespaces map[string]int64, rev int64) error {
	if p == nil || p.unknown {
		return nil
	}
	tmp := fs.PathJoin(dir, presenceFile+".tmp")
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	// The checksum first: pebble's MemFS scrambles what it was given
	// after writing it, in race builds, to catch callers that reuse it.
	bw := bufio.NewWriterSize(io.MultiWriter(crc, f), 64<<10)
	var b []byte
	b = append(b, presenceMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(rev))
	b = binary.LittleEndian.AppendUint64(b, p.seed)
	b = binary.LittleEndian.AppendUint64(b, uint64(p.n))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(p.slots)))
	_, _ = bw.Write(b)
	for _, x := range p.slots {
		_, _ = bw.Write(binary.LittleEndian.AppendUint32(b[:0], x))
	}
	b = binary.LittleEndian.AppendUint64(b[:0], uint64(len(namespaces)))
	for ns, n := range namespaces {
		b = binary.AppendUvarint(b, uint64(len(ns)))
		b = append(b, ns...)
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
	}
	_, _ = bw.Write(b)
	err = bw.Flush() // the first write error, if any
	if err == nil {
		_, err = f.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := fs.Rename(tmp, fs.PathJoin(dir, presenceFile)); err != nil {
		return err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// errNoPresenceFile: there is no saved set to load.
var errNoPresenceFile = errors.New("no saved presence set")

// takePresence reads the set savePresence left in dir, if it was saved at
// rev and holds count keys, and removes the file either way (see
// presenceFile). errNoPresenceFile when there is none; another error when
// one is there but unusable (the caller rebuilds). It reads the file
// through a small buffer straight into the set's table: reading it whole
// first would leave a garbage copy as large as the table on the heap.
func takePresence(fs vfs.FS, dir string, rev, count int64) (*presence, map[string]int64, error) {
	path := fs.PathJoin(dir, presenceFile)
	if _, err := fs.Stat(path); err != nil {
		return nil, nil, errNoPresenceFile
	}
	f, err := fs.Open(path)
	if err != nil {
		return nil, nil, err
	}
	p, namespaces, err := decodePresence(bufio.NewReaderSize(f, 64<<10), rev, count)
	err = errors.Join(err, f.Close())
	if rerr := fs.Remove(path); rerr != nil && err == nil {
		err = fmt.Errorf("removing %s: %w", path, rerr)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, namespaces, nil
}

// decodePresence reads what savePresence wrote, checking it against the
// database's revision and count and its checksum.
func decodePresence(br *bufio.Reader, rev, count int64) (*presence, map[string]int64, error) {
	r := &summingReader{r: br, crc: crc32.New(crc32.MakeTable(crc32.Castagnoli))}
	magic := make([]byte, len(presenceMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !bytes.Equal(magic, presenceMagic) {
		return nil, nil, errors.New("not a presence file of this version")
	}
	var buf [8]byte
	u64 := func() (uint64, error) {
		_, err := io.ReadFull(r, buf[:])
		return binary.LittleEndian.Uint64(buf[:]), err
	}
	var head [4]uint64
	for i := range head {
		v, err := u64()
		if err != nil {
			return nil, nil, fmt.Errorf("truncated: %w", err)
		}
		head[i] = v
	}
	savedRev, seed, n, size := int64(head[0]), head[1], int64(head[2]), head[3]
	if savedRev != rev || n != count {
		return nil, nil, fmt.Errorf("saved at revision %d with %d keys; the database is at %d with %d", savedRev, n, rev, count)
	}
	if size < presenceMinSlots || size > 1<<34 || size&(size-1) != 0 || n*4 > int64(size)*3 {
		return nil, nil, errors.New("corrupt header")
	}
	p := &presence{seed: seed, slots: make([]uint32, size)}
	held := int64(0)
	chunk := make([]byte, 64<<10)
	for i := 0; i < len(p.slots); {
		m := min(len(chunk)/4, len(p.slots)-i)
		if _, err := io.ReadFull(r, chunk[:4*m]); err != nil {
			return nil, nil, fmt.Errorf("truncated: %w", err)
		}
		for j := range m {
			if p.slots[i+j] = binary.LittleEndian.Uint32(chunk[4*j:]); p.slots[i+j] != 0 {
				held++
			}
		}
		i += m
	}
	if held != n {
		return nil, nil, fmt.Errorf("holds %d keys, its header says %d", held, n)
	}
	p.n = int(n)
	k, err := u64()
	if err != nil {
		return nil, nil, fmt.Errorf("truncated: %w", err)
	}
	namespaces := map[string]int64{}
	for ; k > 0; k-- {
		l, err := binary.ReadUvarint(r)
		if err != nil || l > 1<<20 {
			return nil, nil, errors.New("corrupt namespace")
		}
		ns := make([]byte, l)
		if _, err := io.ReadFull(r, ns); err != nil {
			return nil, nil, fmt.Errorf("truncated: %w", err)
		}
		v, err := u64()
		if err != nil {
			return nil, nil, fmt.Errorf("truncated: %w", err)
		}
		namespaces[string(ns)] = int64(v)
	}
	// The checksum covers everything before it, and ends the file.
	if _, err := io.ReadFull(br, buf[:4]); err != nil {
		return nil, nil, fmt.Errorf("truncated: %w", err)
	}
	if binary.LittleEndian.Uint32(buf[:4]) != r.crc.Sum32() {
		return nil, nil, errors.New("checksum mismatch")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, nil, errors.New("data after the checksum")
	}
	return p, namespaces, nil
}

// summingReader reads from r, adding what it returns to crc.
type summingReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (s *summingReader) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	s.crc.Write(b[:n])
	return n, err
}

func (s *summingReader) ReadByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err == nil {
		s.crc.Write([]byte{c})
	}
	return c, err
}
