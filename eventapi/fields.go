package eventapi

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
)

// Field is a selectable field of an Event under its internal (core/v1)
// name; field selectors of both groups are translated to these.
type Field string

// The selectable fields. The first block is upstream's set; the second holds
// the fields the events redesign asked for and upstream never shipped.
const (
	FieldName                    Field = "metadata.name"
	FieldNamespace               Field = "metadata.namespace"
	FieldInvolvedKind            Field = "involvedObject.kind"
	FieldInvolvedNamespace       Field = "involvedObject.namespace"
	FieldInvolvedName            Field = "involvedObject.name"
	FieldInvolvedUID             Field = "involvedObject.uid"
	FieldInvolvedAPIVersion      Field = "involvedObject.apiVersion"
	FieldInvolvedResourceVersion Field = "involvedObject.resourceVersion"
	FieldInvolvedFieldPath       Field = "involvedObject.fieldPath"
	FieldReason                  Field = "reason"
	FieldType                    Field = "type"
	FieldReportingComponent      Field = "reportingComponent"
	FieldSource                  Field = "source"
	FieldAction                  Field = "action"
	FieldReportingInstance       Field = "reportingInstance"
	FieldRelatedKind             Field = "related.kind"
	FieldRelatedNamespace        Field = "related.namespace"
	FieldRelatedName             Field = "related.name"
	FieldRelatedUID              Field = "related.uid"
	FieldRelatedAPIVersion       Field = "related.apiVersion"
	FieldRelatedResourceVersion  Field = "related.resourceVersion"
	FieldRelatedFieldPath        Field = "related.fieldPath"

	// The involves.* fields match an event whose regarding object or whose
	// related object has them: all involves.* terms of a selector must hold
	// for the same one of the two objects. They answer "everything that
	// happened to X" in one query. Only equality is supported.
	FieldInvolvesKind       Field = "involves.kind"
	FieldInvolvesNamespace  Field = "involves.namespace"
	FieldInvolvesName       Field = "involves.name"
	FieldInvolvesUID        Field = "involves.uid"
	FieldInvolvesAPIVersion Field = "involves.apiVersion"

	// The family.* fields select the events of an object and of
	// everything it owns, transitively, at any time (the server resolves
	// them with the ownership lineage it learned; FieldSelector.Matches
	// ignores them). family.uid, or family.kind with family.name, name
	// the object; family.withNodes=true adds the Nodes its Pods ran on.
	// Only equality is supported.
	FieldFamilyKind      Field = "family.kind"
	FieldFamilyNamespace Field = "family.namespace"
	FieldFamilyName      Field = "family.name"
	FieldFamilyUID       Field = "family.uid"
	FieldFamilyWithNodes Field = "family.withNodes"
)

// IsFamily reports whether f is a family.* field.
func IsFamily(f Field) bool {
	switch f {
	case FieldFamilyKind, FieldFamilyNamespace, FieldFamilyName, FieldFamilyUID, FieldFamilyWithNodes:
		return true
	}
	return false
}

// Family splits s into its family.* terms and the others.
func (s FieldSelector) Family() (family, rest FieldSelector) {
	for _, r := range s {
		if IsFamily(r.Field) {
			family = append(family, r)
		} else {
			rest = append(rest, r)
		}
	}
	return family, rest
}

// involvesFields maps each involves.* field to the regarding and related
// fields it stands for.
var involvesFields = map[Field][2]Field{
	FieldInvolvesKind:       {FieldInvolvedKind, FieldRelatedKind},
	FieldInvolvesNamespace:  {FieldInvolvedNamespace, FieldRelatedNamespace},
	FieldInvolvesName:       {FieldInvolvedName, FieldRelatedName},
	FieldInvolvesUID:        {FieldInvolvedUID, FieldRelatedUID},
	FieldInvolvesAPIVersion: {FieldInvolvedAPIVersion, FieldRelatedAPIVersion},
}

// IsInvolves reports whether f is an involves.* field.
func IsInvolves(f Field) bool { _, ok := involvesFields[f]; return ok }

// extensionFields are the selectable fields upstream does not have.
var extensionFields = map[Field]bool{
	FieldAction: true, FieldReportingInstance: true,
	FieldRelatedKind: true, FieldRelatedNamespace: true, FieldRelatedName: true, FieldRelatedUID: true,
	FieldRelatedAPIVersion: true, FieldRelatedResourceVersion: true, FieldRelatedFieldPath: true,
	FieldInvolvesKind: true, FieldInvolvesNamespace: true, FieldInvolvesName: true, FieldInvolvesUID: true,
	FieldInvolvesAPIVersion: true,
	FieldFamilyKind:         true, FieldFamilyNamespace: true, FieldFamilyName: true, FieldFamilyUID: true, FieldFamilyWithNodes: true,
}

// coreLabels maps the field labels core/v1 accepts to internal fields: every
// internal name, one to one.
var coreLabels = func() map[string]Field {
	m := map[string]Field{}
	for _, f := range []Field{
		FieldName, FieldNamespace, FieldInvolvedKind, FieldInvolvedNamespace, FieldInvolvedName,
		FieldInvolvedUID, FieldInvolvedAPIVersion, FieldInvolvedResourceVersion, FieldInvolvedFieldPath,
		FieldReason, FieldType, FieldReportingComponent, FieldSource, FieldAction, FieldReportingInstance,
		FieldRelatedKind, FieldRelatedNamespace, FieldRelatedName, FieldRelatedUID,
		FieldRelatedAPIVersion, FieldRelatedResourceVersion, FieldRelatedFieldPath,
		FieldInvolvesKind, FieldInvolvesNamespace, FieldInvolvesName, FieldInvolvesUID, FieldInvolvesAPIVersion,
		FieldFamilyKind, FieldFamilyNamespace, FieldFamilyName, FieldFamilyUID, FieldFamilyWithNodes,
	} {
		m[string(f)] = f
	}
	return m
}()

// eventsLabels maps the field labels events.k8s.io/v1 accepts to internal
// fields: regarding.* and reportingController are renamed, involvedObject.*
// and reportingComponent are not accepted, as upstream.
var eventsLabels = map[string]Field{
	"metadata.name":             FieldName,
	"metadata.namespace":        FieldNamespace,
	"regarding.kind":            FieldInvolvedKind,
	"regarding.namespace":       FieldInvolvedNamespace,
	"regarding.name":            FieldInvolvedName,
	"regarding.uid":             FieldInvolvedUID,
	"regarding.apiVersion":      FieldInvolvedAPIVersion,
	"regarding.resourceVersion": FieldInvolvedResourceVersion,
	"regarding.fieldPath":       FieldInvolvedFieldPath,
	"reason":                    FieldReason,
	"type":                      FieldType,
	"source":                    FieldSource,
	"reportingController":       FieldReportingComponent,
	"action":                    FieldAction,
	"reportingInstance":         FieldReportingInstance,
	"related.kind":              FieldRelatedKind,
	"related.namespace":         FieldRelatedNamespace,
	"related.name":              FieldRelatedName,
	"related.uid":               FieldRelatedUID,
	"related.apiVersion":        FieldRelatedAPIVersion,
	"related.resourceVersion":   FieldRelatedResourceVersion,
	"related.fieldPath":         FieldRelatedFieldPath,
	"involves.kind":             FieldInvolvesKind,
	"involves.namespace":        FieldInvolvesNamespace,
	"involves.name":             FieldInvolvesName,
	"involves.uid":              FieldInvolvesUID,
	"involves.apiVersion":       FieldInvolvesAPIVersion,
	"family.kind":               FieldFamilyKind,
	"family.namespace":          FieldFamilyNamespace,
	"family.name":               FieldFamilyName,
	"family.uid":                FieldFamilyUID,
	"family.withNodes":          FieldFamilyWithNodes,
}

// FieldLabels returns the field labels v accepts, sorted, for documentation
// and error messages; without extensions, only upstream's.
func FieldLabels(v Version, ext Extensions) []string {
	m := coreLabels
	if v.Shape() == EventsV1 {
		m = eventsLabels
	}
	out := make([]string, 0, len(m))
	for k, f := range m {
		if !bool(ext) && extensionFields[f] {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Value returns the value of f in ev. The source field is the source
// component, falling back to the reporting controller when the component is
// empty, as upstream (kubernetes #92874).
func Value(ev *corev1.Event, f Field) string {
	switch f {
	case FieldName:
		return ev.Name
	case FieldNamespace:
		return ev.Namespace
	case FieldInvolvedKind:
		return ev.InvolvedObject.Kind
	case FieldInvolvedNamespace:
		return ev.InvolvedObject.Namespace
	case FieldInvolvedName:
		return ev.InvolvedObject.Name
	case FieldInvolvedUID:
		return string(ev.InvolvedObject.UID)
	case FieldInvolvedAPIVersion:
		return ev.InvolvedObject.APIVersion
	case FieldInvolvedResourceVersion:
		return ev.InvolvedObject.ResourceVersion
	case FieldInvolvedFieldPath:
		return ev.InvolvedObject.FieldPath
	case FieldReason:
		return ev.Reason
	case FieldType:
		return ev.Type
	case FieldReportingComponent:
		return ev.ReportingController
	case FieldSource:
		if ev.Source.Component != "" {
			return ev.Source.Component
		}
		return ev.ReportingController
	case FieldAction:
		return ev.Action
	case FieldReportingInstance:
		return ev.ReportingInstance
	}
	if strings.HasPrefix(string(f), "related.") {
		r := ev.Related
		if r == nil {
			return ""
		}
		switch f {
		case FieldRelatedKind:
			return r.Kind
		case FieldRelatedNamespace:
			return r.Namespace
		case FieldRelatedName:
			return r.Name
		case FieldRelatedUID:
			return string(r.UID)
		case FieldRelatedAPIVersion:
			return r.APIVersion
		case FieldRelatedResourceVersion:
			return r.ResourceVersion
		case FieldRelatedFieldPath:
			return r.FieldPath
		}
	}
	return ""
}

// Requirement is one term of a field selector: Field equals (or, with
// Negate, does not equal) Value.
type Requirement struct {
	Field  Field
	Value  string
	Negate bool
}

// FieldSelector is a parsed field selector in internal field names: the
// conjunction of its requirements. The empty selector matches everything.
type FieldSelector []Requirement

// Matches reports whether ev satisfies every requirement of s.
func (s FieldSelector) Matches(ev *corev1.Event) bool {
	involves := false
	for _, r := range s {
		if IsInvolves(r.Field) {
			involves = true
			continue
		}
		if IsFamily(r.Field) {
			continue // resolved by the server into the selector's object set
		}
		if (Value(ev, r.Field) == r.Value) == r.Negate {
			return false
		}
	}
	return !involves || s.involves(ev, 0) || (ev.Related != nil && s.involves(ev, 1))
}

// involves reports whether every involves.* term holds for the regarding
// (side 0) or the related (side 1) object.
func (s FieldSelector) involves(ev *corev1.Event, side int) bool {
	for _, r := range s {
		if f, ok := involvesFields[r.Field]; ok && Value(ev, f[side]) != r.Value {
			return false
		}
	}
	return true
}

// Equal returns the value s requires f to equal, if it has such a term.
func (s FieldSelector) Equal(f Field) (string, bool) {
	for _, r := range s {
		if r.Field == f && !r.Negate {
			return r.Value, true
		}
	}
	return "", false
}

// String renders s in internal field names, with values escaped.
func (s FieldSelector) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		op := "="
		if r.Negate {
			op = "!="
		}
		parts[i] = string(r.Field) + op + fields.EscapeValue(r.Value)
	}
	return strings.Join(parts, ",")
}

// UnsupportedFieldError reports a field label the requested version does
// not accept. Its message is upstream's.
type UnsupportedFieldError struct{ Label string }

// Error implements error with upstream's message.
func (e *UnsupportedFieldError) Error() string {
	return fmt.Sprintf("field label not supported: %s", e.Label)
}

// Extensions says whether the fields upstream does not have (action,
// reportingInstance, related.*, involves.*, family.*) are accepted.
type Extensions bool

// ParseFieldSelector parses a field selector in v's field labels (as a
// client sends it) into internal fields. Syntax errors and labels v does not
// accept (extensions only when ext is set) are errors; callers answer both
// with 400 Bad Request.
func ParseFieldSelector(v Version, raw string, ext Extensions) (FieldSelector, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	sel, err := fields.ParseSelector(raw)
	if err != nil {
		return nil, err
	}
	labels := coreLabels
	if v.Shape() == EventsV1 {
		labels = eventsLabels
	}
	reqs := sel.Requirements()
	out := make(FieldSelector, 0, len(reqs))
	for _, r := range reqs {
		f, ok := labels[r.Field]
		if !ok || (!bool(ext) && extensionFields[f]) {
			return nil, &UnsupportedFieldError{Label: r.Field}
		}
		if (IsInvolves(f) || IsFamily(f)) && r.Operator == selection.NotEquals {
			return nil, fmt.Errorf("field selector %s supports only =", r.Field)
		}
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals:
			out = append(out, Requirement{Field: f, Value: r.Value})
		case selection.NotEquals:
			out = append(out, Requirement{Field: f, Value: r.Value, Negate: true})
		default:
			return nil, fmt.Errorf("field selector operator %q is not supported", r.Operator)
		}
	}
	return out, nil
}

// allFields are every selectable field.
var allFields = func() []Field {
	out := make([]Field, 0, len(coreLabels))
	for _, f := range coreLabels {
		out = append(out, f)
	}
	return out
}()

// SameSelection reports whether a and b agree on every selectable field
// and on their labels, so that any field or label selector matches both or
// neither.
func SameSelection(a, b *corev1.Event) bool {
	for _, f := range allFields {
		if Value(a, f) != Value(b, f) {
			return false
		}
	}
	if len(a.Labels) != len(b.Labels) {
		return false
	}
	for k, v := range a.Labels {
		if bv, ok := b.Labels[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
