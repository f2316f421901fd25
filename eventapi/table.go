package eventapi

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// TableColumns are the column definitions of kube-apiserver's Event printer,
// in order. kubectl shows the priority-0 columns by default and all of them
// with -o wide.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
	{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
	{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
	{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
	{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
	{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
	{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
	{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
	{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
}

// TableCells renders ev as one Table row's cells, ages measured at now. A
// series overrides the last-seen time and the count; a singleton with no
// count counts as 1.
func TableCells(ev *corev1.Event, now time.Time) []any {
	firstSeen := age(ev.FirstTimestamp.Time, now)
	if ev.FirstTimestamp.IsZero() {
		firstSeen = age(ev.EventTime.Time, now)
	}
	lastSeen := age(ev.LastTimestamp.Time, now)
	if ev.LastTimestamp.IsZero() {
		lastSeen = firstSeen
	}
	count := ev.Count
	if ev.Series != nil {
		lastSeen = age(ev.Series.LastObservedTime.Time, now)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	return []any{
		lastSeen,
		ev.Type,
		ev.Reason,
		ObjectColumn(ev.InvolvedObject),
		ev.InvolvedObject.FieldPath,
		SourceColumn(ev),
		strings.TrimSpace(ev.Message),
		firstSeen,
		int64(count),
		ev.Name,
	}
}

// ObjectColumn renders an object reference as kubectl get does: kind in
// lower case, then "/name" when there is a name.
func ObjectColumn(ref corev1.ObjectReference) string {
	if ref.Name == "" {
		return strings.ToLower(ref.Kind)
	}
	return fmt.Sprintf("%s/%s", strings.ToLower(ref.Kind), ref.Name)
}

// SourceColumn renders who reported ev: the source component, or the
// reporting controller for new-style events, followed by the host or
// reporting instance.
func SourceColumn(ev *corev1.Event) string {
	component, host := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if host == "" {
		host = ev.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
