package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/pebblestore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fullStore is a real store whose writes fail, while full is set, as a
// store on a full disk's do.
type fullStore struct {
	storage.Interface
	full atomic.Bool
}

func (f *fullStore) err() error {
	return fmt.Errorf("pebblestore: data directory data: 0 bytes free: %w: %w", storage.ErrUnavailable, syscall.ENOSPC)
}

func (f *fullStore) Create(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error) {
	if f.full.Load() {
		return nil, f.err()
	}
	return f.Interface.Create(ctx, ev, opts)
}

func (f *fullStore) Health() error {
	if f.full.Load() {
		return f.err()
	}
	return nil
}

// TestStoreUnavailable: while the store cannot write, writes get 507 with
// a Status naming the storage and the full disk, /readyz fails and reads
// go on; once it can, both recover.
func TestStoreUnavailable(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ps, err := pebblestore.Open(pebblestore.Options{Dir: "data", FS: vfs.NewMem(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	store := &fullStore{Interface: ps}
	url, cs := serveStore(t, store)
	ctx := context.Background()
	events := cs.CoreV1().Events("default")
	mk := func(name string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
			Reason: "Started", Message: "started", Type: corev1.EventTypeNormal}
	}

	if _, err := events.Create(ctx, mk("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	store.full.Store(true)
	_, err = events.Create(ctx, mk("b"), metav1.CreateOptions{})
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInsufficientStorage ||
		!strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "data directory data") {
		t.Fatalf("create on a full store: %v, want a 507 Status naming the data directory and the full disk", err)
	}
	if code, body := readyz(t, url); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Fatalf("/readyz on a full store: %d %q", code, body)
	}
	if l, err := events.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list on a full store: %v", err)
	}
	store.full.Store(false)
	if code, body := readyz(t, url); code != http.StatusOK {
		t.Fatalf("/readyz after space returned: %d %q", code, body)
	}
	if _, err := events.Create(ctx, mk("b"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after space returned: %v", err)
	}
}
