// Package fieldmanager keeps the metadata.managedFields of Events as
// kube-apiserver does, with the ecosystem's field manager
// (k8s.io/apimachinery/pkg/util/managedfields, the one kube-apiserver's
// handlers call): every create, update and patch records its manager's
// fields (operation Update, in the API version written through), and a
// server-side apply merges an applied configuration with kube-apiserver's
// ownership and conflict rules.
//
// The field manager needs a type converter, which kube-apiserver builds
// from its OpenAPI models; so does this package, from models.json: the
// OpenAPI v3 schemas of core/v1 and events.k8s.io/v1 Event and of every
// schema they reference, as Kubernetes publishes them
// (api/openapi-spec/v3 of the k8s.io/kubernetes release matching
// k8s.io/api), so the fields, list types and map keys are upstream's.
// The converter is built once, in New.
//
// The storage form is the core/v1 Event struct, which plays the part of
// kube-apiserver's internal version: the two API versions convert to and
// from it with eventapi's upstream field mapping.
package fieldmanager

import (
	_ "embed" // models.json
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kubevents/kubevents/eventapi"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

//go:embed models.json
var modelsJSON []byte

// hub is the version the field manager converts through: the storage
// form, in any group.
var hub = schema.GroupVersion{Version: runtime.APIVersionInternal}

// Manager updates the managed fields of Events written through either
// API version. It is safe for concurrent use.
type Manager struct {
	byVersion map[eventapi.Version]*managedfields.FieldManager
	creates   createCache
}

// New builds the type converter from the embedded OpenAPI models and a
// field manager per API version.
func New() (*Manager, error) {
	schemas, err := Schemas()
	if err != nil {
		return nil, err
	}
	tc, err := managedfields.NewTypeConverter(schemas, false)
	if err != nil {
		return nil, fmt.Errorf("fieldmanager: %w", err)
	}
	m := &Manager{byVersion: map[eventapi.Version]*managedfields.FieldManager{}}
	for _, v := range []eventapi.Version{eventapi.CoreV1, eventapi.EventsV1} {
		fm, err := managedfields.NewDefaultFieldManager(tc, convertor{}, defaulter{}, creater{}, v.GroupVersion().WithKind("Event"), hub, "", nil)
		if err != nil {
			return nil, fmt.Errorf("fieldmanager: %s: %w", v, err)
		}
		m.byVersion[v] = fm
	}
	return m, nil
}

// Schemas returns the embedded OpenAPI v3 models (see the package
// comment) by name, such as "io.k8s.api.core.v1.Event"; references
// between them are "#/components/schemas/<name>". Each call decodes a
// fresh copy, which the caller may keep and modify.
func Schemas() (map[string]*spec.Schema, error) {
	var doc struct {
		Schemas map[string]*spec.Schema `json:"schemas"`
	}
	if err := json.Unmarshal(modelsJSON, &doc); err != nil {
		return nil, fmt.Errorf("fieldmanager: reading the OpenAPI models: %w", err)
	}
	return doc.Schemas, nil
}

// Update returns ev with its managed fields updated for a create (live
// nil), update or non-apply patch through v by manager, as
// kube-apiserver's handlers do: the fields the write set or changed are
// the manager's (operation Update, ev's managedFields or else live's as
// the starting point, so clients that drop them do not reset them), and
// an object that had none keeps none unless this is a create. ev is
// changed in place; live is only read. Should the field manager fail
// (it should not), ev keeps live's managed fields, as upstream does.
//
// A create of an event without labels, annotations, owners, finalizers
// or managed fields of its own, the recorders' usual one, takes the cheap
// path of createCache: the same entry, from the field set the field
// manager computed for the first create of that shape.
func (m *Manager) Update(v eventapi.Version, live, ev *corev1.Event, manager string) *corev1.Event {
	var key shape
	cacheable := live == nil && manager != ""
	if cacheable {
		if key, cacheable = shapeOf(v, ev); cacheable && m.creates.fill(key, ev, manager) {
			return ev
		}
	}
	if live == nil {
		live = &corev1.Event{}
	}
	out, ok := m.byVersion[v].UpdateNoErrors(live, ev, manager).(*corev1.Event)
	if !ok {
		return ev
	}
	if cacheable {
		m.creates.learn(key, out, manager)
	}
	return out
}

// Apply merges the applied configuration patch (an Event of v, decoded
// from the apply patch's YAML) into live (nil when there is none: the
// apply creates it) for manager, with force taking over fields other
// managers own, and returns the result in the storage form with its
// managed fields. Conflicts are kube-apiserver's 409 with a cause per
// conflicting field; a patch of another version or kind, or one that
// sets managedFields, is its 400. Other errors are the field manager's
// own (a patch that does not fit the schema).
func (m *Manager) Apply(v eventapi.Version, live *corev1.Event, patch map[string]any, manager string, force bool) (*corev1.Event, error) {
	if live == nil {
		live = &corev1.Event{}
	}
	out, err := m.byVersion[v].Apply(live, &unstructured.Unstructured{Object: patch}, manager, force)
	if err != nil {
		return nil, err
	}
	ev, ok := out.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("fieldmanager: apply produced a %T", out)
	}
	return ev, nil
}

// ManagerName is the manager a write records: the fieldManager parameter
// when given, else the User-Agent's product (what precedes its first
// '/'), its non-printable characters dropped and cut at the longest a
// manager may be (kube-apiserver's managerOrUserAgent).
func ManagerName(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	product, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range product {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// convertor converts Events between the two API versions and the storage
// form for the field manager (kube-apiserver passes its scheme). The
// objects it is given may be shared and are never changed: it copies
// before setting a kind.
type convertor struct{}

var _ runtime.ObjectConvertor = convertor{}

// Convert implements runtime.ObjectConvertor; the field manager does not
// call it.
func (convertor) Convert(in, out, _ any) error {
	return fmt.Errorf("fieldmanager: converting %T into %T is not supported", in, out)
}

// ConvertFieldLabel implements runtime.ObjectConvertor; the field manager
// does not call it.
func (convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, _ string) (string, string, error) {
	return "", "", fmt.Errorf("fieldmanager: field label %q of %v is not supported", label, gvk)
}

// ConvertToVersion implements runtime.ObjectConvertor: in (either
// version, typed or unstructured, or the storage form) as core/v1,
// events.k8s.io/v1 or, for the hub version of either group, the storage
// form.
func (convertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gv, ok := target.(schema.GroupVersion)
	if !ok {
		return nil, fmt.Errorf("fieldmanager: unsupported conversion target %v", target)
	}
	var ev *corev1.Event
	switch o := in.(type) {
	case *corev1.Event:
		ev = o
	case *eventsv1.Event:
		if gv == eventsv1.SchemeGroupVersion {
			return eventsWithKind(o), nil
		}
		ev = eventapi.FromEventsV1(o)
	case *unstructured.Unstructured:
		switch o.GetAPIVersion() {
		case corev1.SchemeGroupVersion.String():
			ev = &corev1.Event{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ev); err != nil {
				return nil, fmt.Errorf("fieldmanager: %w", err)
			}
		case eventsv1.SchemeGroupVersion.String():
			e := &eventsv1.Event{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, e); err != nil {
				return nil, fmt.Errorf("fieldmanager: %w", err)
			}
			if gv == eventsv1.SchemeGroupVersion {
				return eventsWithKind(e), nil
			}
			ev = eventapi.FromEventsV1(e)
		default:
			return nil, fmt.Errorf("fieldmanager: unsupported apiVersion %q", o.GetAPIVersion())
		}
	default:
		return nil, fmt.Errorf("fieldmanager: unsupported type %T", in)
	}
	switch gv {
	case corev1.SchemeGroupVersion:
		return coreWithKind(ev), nil
	case eventsv1.SchemeGroupVersion:
		return eventapi.ToEventsV1(ev), nil
	}
	if gv.Version == runtime.APIVersionInternal {
		return ev, nil
	}
	return nil, fmt.Errorf("fieldmanager: unsupported version %v", gv)
}

// coreWithKind returns ev with core/v1's kind and apiVersion: itself when
// it has them, else a shallow copy that does.
func coreWithKind(ev *corev1.Event) *corev1.Event {
	if ev.Kind == "Event" && ev.APIVersion == corev1.SchemeGroupVersion.String() {
		return ev
	}
	c := *ev
	eventapi.SetCoreTypeMeta(&c)
	return &c
}

// eventsWithKind is coreWithKind for events.k8s.io/v1.
func eventsWithKind(ev *eventsv1.Event) *eventsv1.Event {
	if ev.Kind == "Event" && ev.APIVersion == eventsv1.SchemeGroupVersion.String() {
		return ev
	}
	c := *ev
	c.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: eventsv1.SchemeGroupVersion.String()}
	return &c
}

// defaulter is the field manager's runtime.ObjectDefaulter: Events have
// no defaults (kube-apiserver registers no defaulting for them).
type defaulter struct{}

// Default implements runtime.ObjectDefaulter.
func (defaulter) Default(runtime.Object) {}

// creater makes the empty Events the field manager starts applies from.
type creater struct{}

// New implements runtime.ObjectCreater.
func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	switch gvk {
	case corev1.SchemeGroupVersion.WithKind("Event"):
		return &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String()}}, nil
	case eventsv1.SchemeGroupVersion.WithKind("Event"):
		return &eventsv1.Event{TypeMeta: metav1.TypeMeta{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String()}}, nil
	}
	return nil, runtime.NewNotRegisteredErrForKind("eventsd", gvk)
}
