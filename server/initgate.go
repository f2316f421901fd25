package server

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// errGateTimeout is returned by initGate.acquire when its deadline passed
// first.
var errGateTimeout = errors.New("timed out waiting for a turn to send initial events")

// initGate bounds the CPU that watches spend sending their initial events
// (the state they start with: every stored event, for a watch of all
// namespaces without a resourceVersion). Without it, 1,000 such watches
// over 5,000 events decoded and encoded concurrently, and a create beside
// them waited 18 s for a CPU. A watch holds one of the gate's permits only
// while it decodes and encodes a chunk of its initial events into memory,
// not while it writes the chunk to its client, so a client that reads
// slowly holds none. Waiters are served oldest watch first, so that
// under load watches finish their initial state one after another instead
// of all advancing together and all reaching their deadline.
type initGate struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting waiterHeap
}

func newInitGate(permits int) *initGate {
	return &initGate{free: max(permits, 1)}
}

// ticket returns the next watch's place: lower is older.
func (g *initGate) ticket() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	return g.seq
}

// acquire takes a permit for the watch with ticket t, waiting behind older
// watches, until stop delivers or done is closed.
func (g *initGate) acquire(t uint64, done <-chan struct{}, stop <-chan time.Time) error {
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
		err = errors.New("the watch ended while waiting for a turn to send initial events")
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

// release returns a permit, to the oldest waiting watch if there is one.
func (g *initGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releaseLocked()
}

func (g *initGate) releaseLocked() {
	if g.waiting.Len() == 0 {
		g.free++
		return
	}
	w := heap.Pop(&g.waiting).(*waiter)
	close(w.granted)
}

// waiter is a watch waiting for a permit; index is its place in the heap,
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
