package server

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// errGateTimeout is returned by readGate.acquire when its deadline passed
// first.
var errGateTimeout = errors.New("timed out waiting for a turn to read")

// readGate bounds the CPU of the reads whose size clients choose: watches
// sending their initial events (the state they start with: every stored
// event, for a watch of all namespaces without a resourceVersion) and
// the pages after the first of a list of every event. Without it, 1,000
// such watches over 5,000 events decoded and encoded concurrently, and a
// create beside them waited 18 s for a CPU; 1,000 such lists took 4.8 GB.
// A read holds one of the gate's permits only while it decodes and
// encodes a chunk into memory, not while it writes the chunk to its
// client, so a client that reads slowly holds none. Waiters are served
// oldest read first, so that under load reads finish one after another
// instead of all advancing together and all reaching their deadline.
type readGate struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting waiterHeap
}

func newReadGate(permits int) *readGate {
	return &readGate{free: max(permits, 1)}
}

// ticket returns the next read's place: lower is older.
func (g *readGate) ticket() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	return g.seq
}

// acquire takes a permit for the read with ticket t, waiting behind older
// reads, until stop delivers or done is closed.
func (g *readGate) acquire(t uint64, done <-chan struct{}, stop <-chan time.Time) error {
	g.mu.Lock()
	if g.free > 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	w := &waiter{ticket: t, granted: make(chan struct{})}
	heap.Push(&g.waiting, w)
	g.mu.Unlock()
	var err error
	select {
	case <-w.granted:
		return nil
	case <-done:
		err = errors.New("the request ended while waiting for a turn to read")
	case <-stop:
		err = errGateTimeout
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.index < 0 {
		// Granted as we gave up: pass the permit on.
		g.releaseLocked()
		return err
	}
	heap.Remove(&g.waiting, w.index)
	return err
}

// release returns a permit, to the oldest waiting read if there is one.
func (g *readGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releaseLocked()
}

func (g *readGate) releaseLocked() {
	if g.waiting.Len() == 0 {
		g.free++
		return
	}
	w := heap.Pop(&g.waiting).(*waiter)
	close(w.granted)
}

// waiter is a read waiting for a permit; index is its place in the heap,
// -1 once granted.
type waiter struct {
	ticket  uint64
	granted chan struct{}
	index   int
}

// waiterHeap orders waiters oldest ticket first.
type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].ticket < h[j].ticket }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
