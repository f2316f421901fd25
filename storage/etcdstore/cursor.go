package etcdstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/kubevents/kubevents/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ownPrefix is where the store keeps what is not an event, under the
// etcd prefix and outside <prefix>/events/, so that neither this store's
// watches and counts nor kube-apiserver's events resource ever see it:
// <prefix>/kubevents.io/..., the project's API group as a CRD's objects
// would be kept (no CRD of that group exists).
const ownPrefix = "/kubevents.io/"

// maxCursorName bounds a cursor's name: names are sink names from
// eventsd's configuration, and keys stay small.
const maxCursorName = 253

var _ storage.CursorStore = (*Store)(nil)

// cursorKey is <prefix>/kubevents.io/exportcursors/<name>; its value is
// the revision in decimal, as compact_rev_key's, readable with etcdctl.
func (s *Store) cursorKey(name string) string {
	return s.opts.Prefix + ownPrefix + "exportcursors/" + name
}

// checkName checks the name of a cursor or of an election: one path
// segment.
func checkName(what, name string) error {
	if name == "" || len(name) > maxCursorName || strings.Contains(name, "/") {
		return fmt.Errorf("etcdstore: invalid %s name %q: it must have 1 to %d bytes and no '/'", what, name, maxCursorName)
	}
	return nil
}

// Cursor implements storage.CursorStore with a linearizable read of the
// cursor's key.
func (s *Store) Cursor(ctx context.Context, name string) (int64, bool, error) {
	if err := s.checkOpen(); err != nil {
		return 0, false, err
	}
	if err := checkName("cursor", name); err != nil {
		return 0, false, err
	}
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.cli.Get(rctx, s.cursorKey(name))
	if err != nil {
		return 0, false, fmt.Errorf("etcdstore: read cursor %q: %w", name, mapErr(s.unavailable(ctx, err)))
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	rev, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("etcdstore: cursor %q holds %q, not a revision", name, resp.Kvs[0].Value)
	}
	return rev, true, nil
}

// SaveCursor implements storage.CursorStore with a put of the cursor's
// key (no lease: it lasts until deleted). It moves etcd's revision, as
// any etcd write does, but no event's.
//
// When ctx descends from a leading context of Lead, the put is fenced on
// that leadership: Txn(If CreateRevision(election key) = the one it was
// won with, Then Put). A replica that lost the leadership without
// noticing yet (its session expired in etcd while it was cut off) then
// cannot move the cursor its successor now owns: SaveCursor fails with
// an error wrapping storage.ErrConflict and saves nothing.
func (s *Store) SaveCursor(ctx context.Context, name string, rev int64) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := checkName("cursor", name); err != nil {
		return err
	}
	if rev < 0 {
		return fmt.Errorf("etcdstore: cursor %q: negative revision %d", name, rev)
	}
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	txn, l := s.fencedTxn(ctx, rctx)
	resp, err := txn.Then(clientv3.OpPut(s.cursorKey(name), strconv.FormatInt(rev, 10))).Commit()
	if err != nil {
		return fmt.Errorf("etcdstore: save cursor %q: %w", name, mapErr(s.unavailable(ctx, err)))
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdstore: cursor %q not saved: this replica no longer leads %q: %w", name, l.name, storage.ErrConflict)
	}
	return nil
}

// fencedTxn returns a transaction on rctx fenced on the leadership ctx
// carries, if it carries one (ctx descends from a leading context of
// Lead): If CreateRevision(election key) = the one it was won with. The
// transaction then fails (Succeeded false) once that leadership is lost,
// even before this replica notices. The leadership is nil when there is
// none, and the transaction unconditional.
func (s *Store) fencedTxn(ctx, rctx context.Context) (clientv3.Txn, *leadership) {
	txn := s.cli.Txn(rctx)
	l, _ := ctx.Value(leadershipKey{}).(*leadership)
	if l != nil {
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev))
	}
	return txn, l
}
