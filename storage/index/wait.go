package index

import (
	"context"
	"fmt"
)

// WaitRevision returns once load reports a revision of at least rev, or
// with ctx's error. load returns an index's revision and a channel the
// index closes when that revision next advances; both index
// implementations wait for their revision through it.
func WaitRevision(ctx context.Context, rev int64, load func() (int64, <-chan struct{})) error {
	for {
		cur, ch := load()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("index at revision %d, waiting for %d: %w", cur, rev, ctx.Err())
		}
	}
}
