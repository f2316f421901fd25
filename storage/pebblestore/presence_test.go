package pebblestore

import (
	"fmt"
	"testing"
)

func TestPresenceCountsCollisions(t *testing.T) {
	p := newPresence()
	a, b := []byte("odefault/a"), []byte("odefault/b")
	if p.mayContain(a) {
		t.Fatal("empty set contains a")
	}
	p.add(a)
	p.add(a) // a second key with the same hash
	p.remove(a)
	if !p.mayContain(a) {
		t.Fatal("one of two keys sharing a hash was removed, and the hash is gone")
	}
	p.remove(a)
	if p.mayContain(a) || p.mayContain(b) {
		t.Fatal("removed keys still present")
	}
	for i := 0; i < 300; i++ {
		p.add(b)
	}
	for i := 0; i < 300; i++ {
		p.remove(b)
	}
	if !p.mayContain(b) {
		t.Fatal("a saturated count must stay present")
	}
	u := &presence{unknown: true}
	if !u.mayContain([]byte(fmt.Sprint("anything"))) {
		t.Fatal("an unknown set must answer maybe")
	}
}
