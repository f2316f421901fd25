package pebblestore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSeekForward: stepping forward before seeking lands where a seek
// lands, for targets that are the next key, a few keys on, far on,
// between keys (absent), and past the last key, with the iterator's
// upper bound below some of them.
func TestSeekForward(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	for i := 0; i < 200; i += 2 { // even keys only: odd ones are absent
		if err := db.Set(key(i), nil, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil { // the keys in a table as well as not
		t.Fatal(err)
	}
	for i := 1; i < 200; i += 20 {
		if err := db.Set(key(i), nil, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	// Targets in increasing order: neighbours, steps of 1-4 keys, gaps of
	// more than nextsBeforeSeek, absent keys, past the upper bound.
	targets := []int{0, 2, 3, 4, 6, 10, 12, 21, 22, 40, 41, 42, 44, 45, 46, 52, 120, 121, 150, 151, 152, 170, 190, 195, 198, 199, 250}
	for _, upper := range []int{300, 160} {
		t.Run(fmt.Sprintf("upper %d", upper), func(t *testing.T) {
			opts := &pebble.IterOptions{UpperBound: key(upper)}
			it, err := db.NewIter(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			ref, err := db.NewIter(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			positioned := false
			for _, tg := range targets {
				positioned = seekForward(it, key(tg), positioned)
				want := ref.SeekGE(key(tg))
				if positioned != want || want && !bytes.Equal(it.Key(), ref.Key()) {
					var got, at []byte
					if positioned {
						got = it.Key()
					}
					if want {
						at = ref.Key()
					}
					t.Fatalf("target %s: at %q (valid %v), a seek is at %q (valid %v)", key(tg), got, positioned, at, want)
				}
			}
		})
	}
}
