package eventapi

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Criteria select events by namespace, type, reason and reporting
// controller, as retention rules and export filters do in their
// configuration files. Each empty list matches any value; the criteria
// match an event when every non-empty list contains the event's value.
type Criteria struct {
	// Namespaces are the events' namespaces.
	Namespaces []string `json:"namespaces,omitempty"`
	// Types are event types: Normal or Warning.
	Types []string `json:"types,omitempty"`
	// Reasons are the events' reasons.
	Reasons []string `json:"reasons,omitempty"`
	// ReportingControllers match an event's reportingController
	// (events.k8s.io/v1) or its source.component (core/v1): either
	// being in the list matches.
	ReportingControllers []string `json:"reportingControllers,omitempty"`
}

// Matches reports whether ev meets the criteria.
func (c *Criteria) Matches(ev *corev1.Event) bool {
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	if !in(c.Namespaces, ev.Namespace) || !in(c.Types, ev.Type) || !in(c.Reasons, ev.Reason) {
		return false
	}
	if len(c.ReportingControllers) == 0 {
		return true
	}
	return slices.Contains(c.ReportingControllers, ev.ReportingController) ||
		(ev.Source.Component != "" && slices.Contains(c.ReportingControllers, ev.Source.Component))
}

// Validate returns the criteria's errors, under path: types must be
// Normal or Warning.
func (c *Criteria) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range c.Types {
		if t != corev1.EventTypeNormal && t != corev1.EventTypeWarning {
			errs = append(errs, field.NotSupported(path.Child("types").Index(i), t, []string{corev1.EventTypeNormal, corev1.EventTypeWarning}))
		}
	}
	return errs
}
