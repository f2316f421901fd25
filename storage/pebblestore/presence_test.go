package pebblestore

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPresenceAgainstAMap drives the set with random adds and removes,
// through growth and long probe clusters, checking it against a map: a
// stored key is always reported present.
func TestPresenceAgainstAMap(t *testing.T) {
	p := newPresence(0)
	held := map[string]int{}
	rng := rand.New(rand.NewPCG(1, 2))
	key := func(i int) []byte { return []byte(fmt.Sprintf("odefault/e%d", i)) }
	for step := 0; step < 200_000; step++ {
		i := rng.IntN(20_000)
		k := key(i)
		if rng.IntN(3) > 0 {
			p.add(k)
			held[string(k)]++
		} else if held[string(k)] > 0 {
			p.remove(k)
			held[string(k)]--
		}
		if step%997 == 0 {
			for s, c := range held {
				if c > 0 && !p.mayContain([]byte(s)) {
					t.Fatalf("step %d: %s is held %d times but reported absent", step, s, c)
				}
			}
		}
	}
	total := 0
	for _, c := range held {
		total += c
	}
	if p.n != total {
		t.Fatalf("set holds %d entries, the model %d", p.n, total)
	}
	// Absent keys are almost always reported absent.
	falsePos := 0
	for i := 0; i < 10_000; i++ {
		if p.mayContain([]byte(fmt.Sprintf("oother/x%d", i))) {
			falsePos++
		}
	}
	if falsePos > 5 {
		t.Fatalf("%d of 10000 absent keys reported present", falsePos)
	}
}

func TestPresenceRemovesOneOfTwo(t *testing.T) {
	p := newPresence(0)
	a := []byte("odefault/a")
	p.add(a)
	p.add(a)
	p.remove(a)
	if !p.mayContain(a) {
		t.Fatal("one of two entries was removed, and the key is gone")
	}
	p.remove(a)
	if p.mayContain(a) || p.n != 0 {
		t.Fatal("removed key still present")
	}
	if u := (&presence{unknown: true}); !u.mayContain(a) {
		t.Fatal("an unknown set must answer maybe")
	}
}
