package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/kubevents/kubevents/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// electionRetryInterval is how long Lead waits before campaigning again
// after a campaign failed (etcd unavailable): the client's own reconnect
// backoff is capped at 2 s too.
const electionRetryInterval = 2 * time.Second

var _ storage.Elector = (*Store)(nil)

// leadership is what a leading context carries: the election key this
// replica holds and its create revision, which fence SaveCursor.
type leadership struct {
	name string
	key  string
	rev  int64
}

// leadershipKey is the context key of a *leadership.
type leadershipKey struct{}

// electionPrefix is <prefix>/kubevents.io/leader/<name>: each candidate
// puts <that>/<its lease id> under it (go.etcd.io/etcd/client/v3/
// concurrency's election), and the oldest key leads.
func (s *Store) electionPrefix(name string) string {
	return s.opts.Prefix + ownPrefix + "leader/" + name
}

// identity is the value a candidate puts: who it is, for an operator
// reading the election's keys.
func identity() string {
	host, _ := os.Hostname()
	return host + " pid " + strconv.Itoa(os.Getpid())
}

// Lead implements storage.Elector with an etcd election
// (go.etcd.io/etcd/client/v3/concurrency) on
// <prefix>/kubevents.io/leader/<name>, each candidate in a session whose
// lease has Options.ElectionTTL. The leading context ends when release is
// called, ctx ends, the store closes or the session is lost: its lease
// could not be kept alive for its TTL (this replica was cut off from
// etcd; by then etcd expires the lease and another replica may lead) or
// it was revoked. Lost leadership is noticed up to a keep-alive interval
// (a third of the TTL) late; SaveCursor with a context from the leading
// one is fenced on the election key, so a replica deposed meanwhile
// cannot move a cursor. Giving the leadership up (release, Close) revokes
// the session's lease, so another replica takes over at once, not after
// the TTL.
func (s *Store) Lead(ctx context.Context, name string) (context.Context, func(), error) {
	if err := s.checkOpen(); err != nil {
		return nil, nil, err
	}
	if err := checkName("election", name); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	for {
		sess, l, err := s.campaign(cctx, name)
		if err == nil {
			leading, end := context.WithCancel(context.WithValue(ctx, leadershipKey{}, l))
			s.wg.Add(1)
			go s.keepLeading(leading, end, sess)
			return leading, end, nil
		}
		if cctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, storage.ErrClosed
		}
		s.log.Warn("etcdstore: campaigning for leadership failed; trying again", "election", name, "err", err)
		t := s.opts.Clock.NewTimer(electionRetryInterval)
		select {
		case <-t.C():
		case <-cctx.Done():
		}
		t.Stop()
	}
}

// campaign waits until this replica leads name in a new session, and
// returns the session and the leadership won.
func (s *Store) campaign(ctx context.Context, name string) (*concurrency.Session, *leadership, error) {
	sess, err := s.newSession(ctx)
	if err != nil {
		return nil, nil, err
	}
	// A session lost while waiting ends the wait: its key is gone, and
	// the election would otherwise report a win on a deleted key.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(sess.Ctx(), cancel)
	defer stop()
	el := concurrency.NewElection(sess, s.electionPrefix(name))
	if err := el.Campaign(cctx, identity()); err != nil {
		s.endSession(sess)
		return nil, nil, fmt.Errorf("etcdstore: campaign for %q: %w", name, mapErr(s.unavailable(ctx, err)))
	}
	// Check the win: the key must still be ours.
	rctx, rcancel := s.requestCtx(cctx)
	resp, err := s.cli.Get(rctx, el.Key())
	rcancel()
	switch {
	case err != nil:
		err = fmt.Errorf("etcdstore: check leadership of %q: %w", name, mapErr(s.unavailable(ctx, err)))
	case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != el.Rev():
		err = fmt.Errorf("etcdstore: leadership of %q lost as it was won", name)
	}
	if err != nil {
		s.endSession(sess)
		return nil, nil, err
	}
	return sess, &leadership{name: name, key: el.Key(), rev: el.Rev()}, nil
}

// newSession grants a lease of ElectionTTL (bounded by the request
// timeout, unlike concurrency.NewSession's own grant) and keeps it alive
// in a session until endSession.
func (s *Store) newSession(ctx context.Context) (*concurrency.Session, error) {
	ttl := int64((s.opts.ElectionTTL + time.Second - 1) / time.Second)
	rctx, cancel := s.requestCtx(ctx)
	grant, err := s.cli.Grant(rctx, ttl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcdstore: grant a session lease: %w", mapErr(s.unavailable(ctx, err)))
	}
	// The keep-alive runs on a context of its own: endSession stops it.
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(grant.ID), concurrency.WithTTL(int(ttl)),
		concurrency.WithContext(context.Background()))
	if err != nil {
		s.revoke(grant.ID)
		return nil, fmt.Errorf("etcdstore: keep a session lease alive: %w", err)
	}
	return sess, nil
}

// endSession stops keeping sess alive and revokes its lease, deleting the
// keys attached to it (the election key, a hold).
func (s *Store) endSession(sess *concurrency.Session) {
	sess.Orphan()
	s.revoke(sess.Lease())
}

func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.RequestTimeout)
	defer cancel()
	if _, err := s.cli.Revoke(clientv3.WithRequireLeader(ctx), id); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("etcdstore: revoking a session lease failed; it expires by itself", "lease", fmt.Sprintf("%x", int64(id)), "err", err)
	}
}

// keepLeading ends the leadership when leading ends (release, or the
// caller's context), the session is lost or the store closes.
func (s *Store) keepLeading(leading context.Context, end context.CancelFunc, sess *concurrency.Session) {
	defer s.wg.Done()
	select {
	case <-leading.Done():
	case <-sess.Done():
	case <-s.ctx.Done():
	}
	end()
	s.endSession(sess)
}
