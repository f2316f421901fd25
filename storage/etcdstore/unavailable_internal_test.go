package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestIsUnavailable: the errors etcd and its client give while etcd
// cannot serve are recognised; others, such as a compacted revision or a
// request too large, are not.
func TestIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrTimeout, true},
		{rpctypes.ErrTimeoutDueToLeaderFail, true},
		{rpctypes.ErrTimeoutDueToConnectionLost, true},
		{rpctypes.ErrStopped, true},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:2379: connect: connection refused\""), true},
		{status.Error(codes.Unknown, raftStoppedMessage), true},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{clientv3.ErrNoAvailableEndpoints, true},
		{rpctypes.ErrCompacted, false},
		{rpctypes.ErrRequestTooLarge, false},
		{status.Error(codes.Unknown, "something else"), false},
		{context.Canceled, false},
		{errors.New("other"), false},
	} {
		if got := isUnavailable(tc.err); got != tc.want {
			t.Errorf("isUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestIsNoSpace: etcd's "database space exceeded", as the client returns
// it or as a raw gRPC status, wrapped or not, is recognised; other
// resource-exhausted answers (too many requests) and unavailability are
// not, and it is not mistaken for unavailability.
func TestIsNoSpace(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrNoSpace, true},
		{rpctypes.ErrGRPCNoSpace, true},
		{fmt.Errorf("put: %w", rpctypes.ErrNoSpace), true},
		{rpctypes.ErrTooManyRequests, false},
		{rpctypes.ErrNoLeader, false},
		{errors.New("etcdserver: mvcc: database space exceeded"), false},
	} {
		if got := isNoSpace(tc.err); got != tc.want {
			t.Errorf("isNoSpace(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if isUnavailable(rpctypes.ErrNoSpace) {
		t.Error("etcd's database space exceeded is taken for unavailability")
	}
}
