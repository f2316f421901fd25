package events

import (
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// objectKey identifies an object in the isomorphism key: its reference
// without resourceVersion, so that events about an object that changes
// between occurrences still form one series (client-go keys on the whole
// reference and never forms a series for such an object).
type objectKey struct {
	kind, namespace, name, apiVersion, fieldPath string
	uid                                          types.UID
}

func objectKeyOf(r *corev1.ObjectReference) objectKey {
	return objectKey{kind: r.Kind, namespace: r.Namespace, name: r.Name, apiVersion: r.APIVersion, fieldPath: r.FieldPath, uid: r.UID}
}

// eventKey is the isomorphism key of the events redesign: occurrences with
// equal keys are one event (and, repeated, one series). The note is not
// part of it, as upstream.
type eventKey struct {
	eventType, action, reason, controller, instance string
	regarding, related                              objectKey
}

// references resolves objects to references without allocating on the
// common path: an object that carries its TypeMeta, or whose Go type was
// seen before, needs no scheme lookup.
type references struct {
	scheme *runtime.Scheme
	gvks   sync.Map // reflect.Type → gvkStrings, for types the scheme knows
}

type gvkStrings struct{ apiVersion, kind string }

// key returns the objectKey of obj.
func (r *references) key(obj runtime.Object) (objectKey, error) {
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		return objectKeyOf(ref), nil
	}
	m, ok := obj.(interface {
		GetName() string
		GetNamespace() string
		GetUID() types.UID
	})
	if !ok {
		ref, err := r.reference(obj)
		if err != nil {
			return objectKey{}, err
		}
		return objectKeyOf(ref), nil
	}
	var apiVersion, kind string
	if g, ok := r.gvks.Load(reflect.TypeOf(obj)); ok {
		apiVersion, kind = g.(gvkStrings).apiVersion, g.(gvkStrings).kind
	} else {
		apiVersion, kind = obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
		if kind == "" {
			g, err := r.gvk(obj)
			if err != nil {
				return objectKey{}, err
			}
			apiVersion, kind = g.apiVersion, g.kind
		}
	}
	return objectKey{kind: kind, namespace: m.GetNamespace(), name: m.GetName(), apiVersion: apiVersion, uid: m.GetUID()}, nil
}

// gvk returns the API version and kind the scheme gives obj's Go type,
// remembering them: a typed object belongs to one group-version whatever
// its (often empty) TypeMeta says.
func (r *references) gvk(obj runtime.Object) (gvkStrings, error) {
	t := reflect.TypeOf(obj)
	if g, ok := r.gvks.Load(t); ok {
		return g.(gvkStrings), nil
	}
	kinds, unversioned, err := r.scheme.ObjectKinds(obj)
	if err != nil {
		return gvkStrings{}, fmt.Errorf("no kind for %T: %w", obj, err)
	}
	g := gvkStrings{apiVersion: kinds[0].GroupVersion().String(), kind: kinds[0].Kind}
	if !unversioned && len(kinds) == 1 {
		r.gvks.Store(t, g)
	}
	return g, nil
}

// reference returns the full reference to obj (with resourceVersion), as
// stored in a new event.
func (r *references) reference(obj runtime.Object) (*corev1.ObjectReference, error) {
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		c := *ref
		return &c, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("no reference for %T: %w", obj, err)
	}
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	if kind == "" {
		g, err := r.gvk(obj)
		if err != nil {
			return nil, err
		}
		apiVersion, kind = g.apiVersion, g.kind
	}
	return &corev1.ObjectReference{Kind: kind, APIVersion: apiVersion, Name: m.GetName(), Namespace: m.GetNamespace(),
		UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}, nil
}
