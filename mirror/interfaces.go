package mirror

import (
	"context"

	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Source is the source cluster's core/v1 Events of every namespace.
// client-go's typed EventInterface (CoreV1().Events("")) implements it.
type Source interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.EventList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Store is what the mirror needs of eventsd's store: reading and writing
// single events, listing (to reconcile propagated deletions), and a
// durable cursor. A store that also implements storage.Elector is shared
// by replicas, of which only the leader mirrors.
type Store interface {
	Get(ctx context.Context, namespace, name string) (*corev1.Event, error)
	Create(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error)
	Update(ctx context.Context, ev *corev1.Event, opts storage.WriteOptions) (*corev1.Event, error)
	Delete(ctx context.Context, namespace, name string, pre storage.Preconditions) (*corev1.Event, error)
	List(ctx context.Context, opts storage.ListOptions) (*storage.ListResult, error)
	storage.CursorStore
}
