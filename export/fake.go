package export

import (
	"context"
	"sync"
)

// FakeSink is a Sink for tests: it keeps the batches it acknowledged and
// fails as its Fail function says.
type FakeSink struct {
	// Fail, when set, is asked before each Send; a non-nil error fails
	// that Send (nothing is kept).
	Fail func(batch []Record) error

	mu      sync.Mutex
	batches [][]Record
	sends   int
	closed  bool
}

var _ Sink = (*FakeSink)(nil)

// Send implements Sink.
func (f *FakeSink) Send(ctx context.Context, batch []Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.sends++
	fail := f.Fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(batch); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, append([]Record(nil), batch...))
	return nil
}

// Close implements Sink.
func (f *FakeSink) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Batches returns the batches acknowledged so far.
func (f *FakeSink) Batches() [][]Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]Record(nil), f.batches...)
}

// Records returns the records acknowledged so far, in order.
func (f *FakeSink) Records() []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rs []Record
	for _, b := range f.batches {
		rs = append(rs, b...)
	}
	return rs
}

// Sends returns how many times Send was called.
func (f *FakeSink) Sends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sends
}

// Closed reports whether Close was called.
func (f *FakeSink) Closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}
