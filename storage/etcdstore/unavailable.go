package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubevents/kubevents/storage"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// healthCacheInterval is how long Health reuses its last answer:
// readiness probes of several kubelets and load balancers cost etcd at
// most one request a second.
const healthCacheInterval = time.Second

// raftStoppedMessage is go.etcd.io/raft's ErrStopped, which a member
// being stopped returns for the requests it was serving, as a gRPC
// status of code Unknown.
const raftStoppedMessage = "raft: stopped"

// unavailableError is etcd being unreachable, without a leader or too
// slow to answer within the request timeout: storage.ErrUnreachable,
// naming the endpoints and the cause.
type unavailableError struct {
	endpoints string
	cause     error
}

// Error implements error.
func (e *unavailableError) Error() string {
	return "etcd at " + e.endpoints + " is unavailable: " + e.cause.Error()
}

// Unwrap makes errors.Is hold for storage.ErrUnreachable (and so
// storage.ErrUnavailable) and for the cause.
func (e *unavailableError) Unwrap() []error { return []error{storage.ErrUnreachable, e.cause} }

// isUnavailable reports whether err, from a request whose caller is
// still waiting, means etcd cannot serve now: no connection (refused,
// no endpoint ready), no leader or a leader change, etcd's own timeouts,
// a member stopping mid-request, or the store's request timeout
// expiring.
func isUnavailable(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		// ErrNoLeader, ErrLeaderChanged, ErrStopped, ErrNotCapable and
		// the ErrTimeout family all carry these codes.
		return ee.Code() == codes.Unavailable || ee.Code() == codes.DeadlineExceeded
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.DeadlineExceeded:
			return true
		case codes.Unknown:
			return st.Message() == raftStoppedMessage
		}
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, clientv3.ErrNoAvailableEndpoints)
}

// noSpaceError is etcd refusing a write because its database has reached
// its quota (--quota-backend-bytes) and the NOSPACE alarm is raised:
// storage.ErrUnavailable, as a full disk under pebble, and not
// storage.ErrUnreachable, since etcd answers (reads and deletes work)
// and waiting does not help until an operator frees space. The message
// names etcd's endpoints and etcd's remedy.
type noSpaceError struct {
	endpoints string
	cause     error
}

// Error implements error.
func (e *noSpaceError) Error() string {
	return "etcd at " + e.endpoints + " refuses writes: database space exceeded (its NOSPACE alarm is raised); " +
		"free space by compacting and defragmenting etcd, then disarm the alarm " +
		"(etcdctl compact, etcdctl defrag, etcdctl alarm disarm), or raise its --quota-backend-bytes: " + e.cause.Error()
}

// Unwrap makes errors.Is hold for storage.ErrUnavailable and for the
// cause.
func (e *noSpaceError) Unwrap() []error { return []error{storage.ErrUnavailable, e.cause} }

// isNoSpace reports whether err is etcd's "database space exceeded":
// the write would take its database past the quota, or the NOSPACE alarm
// is raised.
func isNoSpace(err error) bool {
	if errors.Is(err, rpctypes.ErrNoSpace) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && st.Message() == rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace)
}

// unavailable wraps err as storage.ErrUnreachable when it means etcd
// cannot serve now, unless ctx (the caller's) has ended: then the caller
// gave up (its own deadline, a client gone) and err is returned as it is.
// etcd's "database space exceeded" becomes a noSpaceError whatever ctx.
func (s *Store) unavailable(ctx context.Context, err error) error {
	if err != nil && isNoSpace(err) {
		return &noSpaceError{endpoints: strings.Join(s.cli.Endpoints(), ","), cause: err}
	}
	if err == nil || ctx.Err() != nil || !isUnavailable(err) {
		return err
	}
	return &unavailableError{endpoints: strings.Join(s.cli.Endpoints(), ","), cause: err}
}

// requestCtx bounds one etcd request: it fails after the store's request
// timeout even while etcd is gone (the client would otherwise wait for a
// connection as long as the caller does), and at once when the member it
// reaches has no leader.
func (s *Store) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), s.opts.RequestTimeout)
}

// boundedKV is the kubernetes.Interface the store uses: each request is
// bounded by requestCtx and its failure mapped by unavailable.
type boundedKV struct {
	s  *Store
	kv kubernetes.Interface
}

var _ kubernetes.Interface = boundedKV{}

// Get implements kubernetes.Interface.
func (b boundedKV) Get(ctx context.Context, key string, opts kubernetes.GetOptions) (kubernetes.GetResponse, error) {
	rctx, cancel := b.s.requestCtx(ctx)
	defer cancel()
	r, err := b.kv.Get(rctx, key, opts)
	return r, b.s.unavailable(ctx, err)
}

// List implements kubernetes.Interface.
func (b boundedKV) List(ctx context.Context, prefix string, opts kubernetes.ListOptions) (kubernetes.ListResponse, error) {
	rctx, cancel := b.s.requestCtx(ctx)
	defer cancel()
	r, err := b.kv.List(rctx, prefix, opts)
	return r, b.s.unavailable(ctx, err)
}

// Count implements kubernetes.Interface.
func (b boundedKV) Count(ctx context.Context, prefix string, opts kubernetes.CountOptions) (int64, error) {
	rctx, cancel := b.s.requestCtx(ctx)
	defer cancel()
	n, err := b.kv.Count(rctx, prefix, opts)
	return n, b.s.unavailable(ctx, err)
}

// OptimisticPut implements kubernetes.Interface.
func (b boundedKV) OptimisticPut(ctx context.Context, key string, value []byte, expectedRevision int64, opts kubernetes.PutOptions) (kubernetes.PutResponse, error) {
	rctx, cancel := b.s.requestCtx(ctx)
	defer cancel()
	r, err := b.kv.OptimisticPut(rctx, key, value, expectedRevision, opts)
	return r, b.s.unavailable(ctx, err)
}

// OptimisticDelete implements kubernetes.Interface.
func (b boundedKV) OptimisticDelete(ctx context.Context, key string, expectedRevision int64, opts kubernetes.DeleteOptions) (kubernetes.DeleteResponse, error) {
	rctx, cancel := b.s.requestCtx(ctx)
	defer cancel()
	r, err := b.kv.OptimisticDelete(rctx, key, expectedRevision, opts)
	return r, b.s.unavailable(ctx, err)
}

// get is cli.Get bounded and mapped as boundedKV's requests are.
func (s *Store) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	r, err := s.cli.Get(rctx, key, opts...)
	return r, s.unavailable(ctx, err)
}

// txn commits a transaction of ops, bounded and mapped as boundedKV's
// requests are.
func (s *Store) txn(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	r, err := s.cli.Txn(rctx).Then(ops...).Commit()
	return r, s.unavailable(ctx, err)
}

// grant grants a lease, bounded and mapped as boundedKV's requests are.
func (s *Store) grant(ctx context.Context, secs int64) (*clientv3.LeaseGrantResponse, error) {
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	r, err := s.cli.Grant(rctx, secs)
	return r, s.unavailable(ctx, err)
}

// healthState is Health's cached answer.
type healthState struct {
	mu      sync.Mutex
	checked time.Time // on the store's clock; zero: never
	err     error
}

// Health implements storage.HealthReporter as kube-apiserver's etcd
// readiness check does: a linearizable Get of <prefix>/health, requiring
// a leader, bounded by Options.ReadycheckTimeout. The answer is reused
// for healthCacheInterval on the store's clock, and concurrent probes
// share one check. While etcd is unreachable or without quorum the error
// wraps storage.ErrUnreachable; it clears by itself once etcd answers
// again.
//
// Unlike kube-apiserver's check, it also fails while etcd's NOSPACE
// alarm is raised (etcd's own /health does too): etcd then refuses
// every write, which the server answers 507, as a full disk under
// pebble, which fails readiness as well. The error is the writes'
// noSpaceError (storage.ErrUnavailable, not ErrUnreachable: reads go
// on), and it clears by itself once the alarm is disarmed.
func (s *Store) Health() error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := s.opts.Clock.Now()
	if !h.checked.IsZero() && now.Sub(h.checked) < healthCacheInterval {
		return h.err
	}
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(s.ctx), s.opts.ReadycheckTimeout)
	defer cancel()
	_, err := s.cli.Get(ctx, path.Join(s.opts.Prefix, "health"))
	if err == nil {
		err = s.noSpaceAlarm(ctx)
	}
	if err != nil && !isNoSpace(err) {
		if s.ctx.Err() != nil {
			err = storage.ErrClosed
		} else {
			// Any failure means the store cannot serve now, the causes
			// isUnavailable knows and others (say, a permission error).
			err = &unavailableError{endpoints: strings.Join(s.cli.Endpoints(), ","), cause: err}
		}
	}
	switch was := h.err; {
	case err != nil && (was == nil || isNoSpace(err) != isNoSpace(was)):
		s.log.Error("etcdstore: not ready", "err", err)
	case err == nil && was != nil:
		s.log.Info("etcdstore: ready again", "was", was.Error())
	}
	h.checked, h.err = s.opts.Clock.Now(), err
	return err
}

// noSpaceAlarm returns a noSpaceError while etcd's NOSPACE alarm is
// raised on any member, nil otherwise. etcd's alarm list is the only
// typed account of its alarms (a member's Status lists them only as
// text); a list it does not give (a user it does not permit, a timeout)
// leaves readiness to the get before it.
func (s *Store) noSpaceAlarm(ctx context.Context) error {
	r, err := s.cli.AlarmList(ctx)
	if err != nil {
		return nil
	}
	for _, a := range r.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			return &noSpaceError{endpoints: strings.Join(s.cli.Endpoints(), ","),
				cause: fmt.Errorf("%w (alarm raised by member %x)", rpctypes.ErrNoSpace, a.MemberID)}
		}
	}
	return nil
}

// healthy reports whether Health's last answer, however old, was that
// etcd answers: nil, or its NOSPACE alarm (reads still work).
func (s *Store) healthy() bool {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.err == nil || isNoSpace(s.health.err)
}
