package eventapi

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Length limits kube-apiserver enforces on new-style events (those with
// eventTime set). They are counted in bytes.
const (
	ReportingInstanceLengthLimit = 128
	ActionLengthLimit            = 128
	ReasonLengthLimit            = 128
	NoteLengthLimit              = 1024
)

// ValidateCreate returns the errors kube-apiserver reports when ev is created
// through v: first the group's own checks (lenient legacy checks for core/v1,
// strict ones for events.k8s.io/v1) and, only if those pass, the generic
// object-metadata checks every resource gets. Field paths use the internal
// (core) names, as upstream does.
func ValidateCreate(ev *corev1.Event, v Version) field.ErrorList {
	errs := legacyValidate(ev, v)
	if v.Shape() == EventsV1 {
		errs = append(errs, apivalidation.ValidateObjectMeta(&ev.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
		errs = append(errs, validateSeries(ev)...)
		if ev.EventTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
		}
		if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
			errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
		}
		if !ev.FirstTimestamp.IsZero() {
			errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
		}
		if !ev.LastTimestamp.IsZero() {
			errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
		}
		if ev.Count != 0 {
			errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
		}
		if ev.Source.Component != "" || ev.Source.Host != "" {
			errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return apivalidation.ValidateObjectMetaAccessor(&ev.ObjectMeta, true, path.ValidatePathSegmentName, field.NewPath("metadata"))
}

// ValidateUpdate returns the errors kube-apiserver reports when old is
// replaced by ev through v. Through core/v1 only the legacy checks apply, so
// count, lastTimestamp and message may change; through events.k8s.io/v1 only
// series, labels and annotations may change.
func ValidateUpdate(ev, old *corev1.Event, v Version) field.ErrorList {
	errs := legacyValidate(ev, v)
	if v.Shape() == EventsV1 {
		errs = append(errs, apivalidation.ValidateObjectMetaUpdate(&ev.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))...)
		if !apiequality.Semantic.DeepEqual(ev.Series, old.Series) {
			errs = append(errs, validateSeries(ev)...)
		}
		immutable := func(newVal, oldVal any, name string) {
			errs = append(errs, apivalidation.ValidateImmutableField(newVal, oldVal, field.NewPath(name))...)
		}
		immutable(ev.InvolvedObject, old.InvolvedObject, "involvedObject")
		immutable(ev.Reason, old.Reason, "reason")
		immutable(ev.Message, old.Message, "message")
		immutable(ev.Source, old.Source, "source")
		immutable(ev.FirstTimestamp, old.FirstTimestamp, "firstTimestamp")
		immutable(ev.LastTimestamp, old.LastTimestamp, "lastTimestamp")
		immutable(ev.Count, old.Count, "count")
		immutable(ev.Type, old.Type, "type")
		immutable(ev.Action, old.Action, "action")
		immutable(ev.Related, old.Related, "related")
		immutable(ev.ReportingController, old.ReportingController, "reportingController")
		immutable(ev.ReportingInstance, old.ReportingInstance, "reportingInstance")
		// eventTime is compared at microsecond precision in UTC: clients that
		// round-trip it through MicroTime must not trip over nanoseconds
		// (kubernetes #111928).
		if !ev.EventTime.UTC().Truncate(time.Microsecond).Equal(old.EventTime.UTC().Truncate(time.Microsecond)) {
			errs = append(errs, field.Invalid(field.NewPath("eventTime"), ev.EventTime, "field is immutable"))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	errs = apivalidation.ValidateObjectMetaAccessor(&ev.ObjectMeta, true, path.ValidatePathSegmentName, field.NewPath("metadata"))
	return append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(&ev.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))...)
}

// legacyValidate holds the checks every API version applies, on create and
// update alike.
func legacyValidate(ev *corev1.Event, v Version) field.ErrorList {
	var errs field.ErrorList
	controller := "reportingController"
	if v.Shape() == CoreV1 {
		controller = "reportingComponent"
	}
	nsMismatch := func() {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), ev.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	if ev.EventTime.IsZero() {
		// Old-style event: the namespace must follow the involved object; a
		// cluster-scoped object's events live in "default" (or nowhere).
		switch {
		case ev.InvolvedObject.Namespace == "":
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				nsMismatch()
			}
		case ev.Namespace != ev.InvolvedObject.Namespace:
			nsMismatch()
		}
	} else {
		// New-style event: a mismatch with the involved object's namespace
		// is allowed, but cluster-scoped objects' events must be in default
		// or kube-system, and the reporting fields are required.
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			nsMismatch()
		}
		if ev.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath(controller), ""))
		}
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath(controller), ev.ReportingController, msg))
		}
		errs = append(errs, requiredWithLimit(ev.ReportingInstance, "reportingInstance", ReportingInstanceLengthLimit)...)
		errs = append(errs, requiredWithLimit(ev.Action, "action", ActionLengthLimit)...)
		errs = append(errs, requiredWithLimit(ev.Reason, "reason", ReasonLengthLimit)...)
		if len(ev.Message) > NoteLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", NoteLengthLimit)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

func requiredWithLimit(value, name string, limit int) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(field.NewPath(name), "")}
	}
	if len(value) > limit {
		return field.ErrorList{field.Invalid(field.NewPath(name), "", fmt.Sprintf("can have at most %v characters", limit))}
	}
	return nil
}

func validateSeries(ev *corev1.Event) field.ErrorList {
	if ev.Series == nil {
		return nil
	}
	var errs field.ErrorList
	if ev.Series.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if ev.Series.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return errs
}
