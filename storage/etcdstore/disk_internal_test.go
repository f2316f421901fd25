package etcdstore

import "errors"

// CheckpointIndex writes a consistent copy of the store's on-disk index,
// as of now, to dir: what a crash that lost the index's later batches
// (written without fsync) leaves behind.
func (s *Store) CheckpointIndex(dir string) error {
	if s.disk == nil {
		return errors.New("no on-disk index")
	}
	return s.disk.Checkpoint(dir)
}

// IndexRevision is the revision the store's index reflects.
func (s *Store) IndexRevision() int64 { return s.idx.Load().m.Revision() }
