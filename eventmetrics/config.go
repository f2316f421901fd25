package eventmetrics

import (
	"fmt"
	"slices"
	"time"

	"github.com/kubevents/kubevents/internal/duration"

	"github.com/kubevents/kubevents/internal/configfile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apiVersion and kind an event metrics configuration file must
// declare.
const (
	ConfigurationAPIVersion = "eventsd.kubevents.io/v1alpha1"
	ConfigurationKind       = "EventMetricsConfiguration"
)

// The labels of eventsd_event_occurrences_total, in the order they are
// exported.
const (
	LabelNamespace           = "namespace"
	LabelType                = "type"
	LabelReason              = "reason"
	LabelKind                = "kind"
	LabelReportingController = "reporting_controller"
	// LabelName is the regarding object's name. By default it is kept
	// only for the events NameFor selects (DefaultNameFor: Warning
	// events and the shipped alerts' reasons), so that alerts name the
	// object; its value is empty (the label absent) for the others.
	LabelName = "name"
	// LabelCluster is the cluster of a fleet the event is of (eventsd
	// mirroring several clusters: --sources-config); its value is empty
	// (the label absent) for the root cluster's events, so an eventsd
	// without a fleet exports the series it always did.
	LabelCluster = "cluster"
)

// AllLabels are the labels an occurrence can carry, in export order.
var AllLabels = []string{LabelNamespace, LabelType, LabelReason, LabelKind, LabelReportingController, LabelName, LabelCluster}

// DefaultLabels are the labels kept when the configuration names none:
// all of them, the object's name only for the events nameFor (by default
// DefaultNameFor) selects.
var DefaultLabels = []string{LabelNamespace, LabelType, LabelReason, LabelKind, LabelReportingController, LabelName, LabelCluster}

// DefaultNameFor selects the events whose occurrences carry the object's
// name when the configuration names no labels: Warning events, and the
// reasons the shipped alerts (deploy/prometheus/eventsd-rules.yaml) are
// about, some of which are Normal events (the kubelet's image pull
// BackOff, the node controller's NodeNotReady).
func DefaultNameFor() *NameSelection {
	return &NameSelection{
		Types: []string{"Warning"},
		Reasons: []string{"BackOff", "OOMKilling", "FailedScheduling", "ErrImagePull", "ImagePullBackOff", "Failed",
			"NodeNotReady", "FailedMount", "FailedAttachVolume", "Evicted"},
	}
}

// DefaultIdleExpiry is how long a label set of the occurrence counter
// may go without growing before it is deleted, when the configuration
// does not say: longer than any shipped alert's window (10 minutes), so
// that a deleted series is one no alert is counting.
const DefaultIdleExpiry = time.Hour

// MinIdleExpiry is the shortest idleExpiry accepted (0s aside): a label
// set must outlive Prometheus' lookback (5 minutes) and any sane scrape
// interval, or its last occurrences could be deleted before a scrape
// saw them.
const MinIdleExpiry = 5 * time.Minute

// NameSelection chooses the events whose occurrences carry the regarding
// object's name: those whose type is among Types or whose reason is
// among Reasons. The others' name label is empty.
type NameSelection struct {
	// Types are event types (Warning, Normal) whose events carry the
	// object's name.
	Types []string `json:"types,omitempty"`
	// Reasons are event reasons whose events carry the object's name,
	// whatever their type.
	Reasons []string `json:"reasons,omitempty"`
}

// selects reports whether s selects ev's type and reason; a nil s
// selects every event.
func (s *NameSelection) selects(typ, reason string) bool {
	return s == nil || slices.Contains(s.Types, typ) || slices.Contains(s.Reasons, reason)
}

// DefaultMaxLabelSets bounds the label sets of the occurrence counter
// when the configuration does not: a thousand series cost a scrape about
// 150 KB of text (see BENCHMARKS.md) and the server a few hundred KB.
const DefaultMaxLabelSets = 1000

// MaxMaxLabelSets is the largest maxLabelSets accepted: beyond it a
// scrape grows past tens of MB, which Prometheus' default scrape limits
// and eventsd's memory should not be asked for.
const MaxMaxLabelSets = 100000

// Configuration is the event metrics configuration file. Its zero value
// (no file) is the default: DefaultLabels with the name for
// DefaultNameFor's events, every namespace and reason its own value,
// DefaultMaxLabelSets of which half at most with a name, label sets
// idle for DefaultIdleExpiry deleted.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`
	// Labels are the labels kept, among namespace, type, reason, kind,
	// reporting_controller and name (the regarding object's); empty
	// keeps them all, name only for the events nameFor selects (by
	// default Warning events and the shipped alerts' reasons). A label
	// left out is not exported: its values are summed. name listed here
	// without nameFor is kept for every event (a series per object).
	Labels []string `json:"labels,omitempty"`
	// NameFor chooses the events whose occurrences carry the object's
	// name (types and reasons); the others' name is empty. It needs name
	// among the labels (or no labels listed). Absent: with no labels
	// listed, Warning events and the shipped alerts' reasons; with name
	// listed, every event.
	NameFor *NameSelection `json:"nameFor,omitempty"`
	// Namespaces, when not empty, are the namespaces that keep their own
	// value of the namespace label; other namespaces' occurrences are
	// counted under the value _other.
	Namespaces []string `json:"namespaces,omitempty"`
	// Reasons, when not empty, are the reasons that keep their own value
	// of the reason label; other reasons' occurrences are counted under
	// the value _other.
	Reasons []string `json:"reasons,omitempty"`
	// MaxLabelSets is the number of label sets (series) the occurrence
	// counter holds at most (default 1000, at most 100000). Occurrences
	// of a new label set past it are counted in the series whose every
	// label is _overflow, and the refusal in
	// eventsd_event_metrics_label_sets_refused_total.
	MaxLabelSets int `json:"maxLabelSets,omitempty"`
	// MaxNamedLabelSets is the number of those label sets that may carry
	// an object's name (at most maxLabelSets; default half of it when
	// nameFor applies, all of it when name is kept for every event).
	// An occurrence whose named label set is refused is counted in the
	// same label set without the name, and the refusal in
	// eventsd_event_metrics_names_refused_total, so the nameless label
	// sets alerts fall back on keep their room.
	MaxNamedLabelSets int `json:"maxNamedLabelSets,omitempty"`
	// IdleExpiry is how long a label set may go without growing before
	// it is deleted from the counter, freeing its place under
	// maxLabelSets as objects come and go (default 1h, at least 5m; 0s
	// keeps every label set until eventsd stops). Growth is seen by the
	// scrapes: a label set goes at the first scrape at least idleExpiry
	// after the last one that saw it grow. A deleted label set
	// that grows again starts from 0: to Prometheus a counter reset,
	// which rate() and increase() handle.
	IdleExpiry string `json:"idleExpiry,omitempty"`
}

// nameKept reports whether c keeps the name label.
func (c *Configuration) nameKept() bool {
	return len(c.Labels) == 0 || slices.Contains(c.Labels, LabelName)
}

// nameFor returns the selection of events that carry a name: nil for
// every event.
func (c *Configuration) nameFor() *NameSelection {
	switch {
	case c.NameFor != nil:
		return c.NameFor
	case len(c.Labels) == 0:
		return DefaultNameFor()
	}
	return nil
}

// maxLabelSets returns the bound of label sets, defaulted.
func (c *Configuration) maxLabelSets() int {
	if c.MaxLabelSets == 0 {
		return DefaultMaxLabelSets
	}
	return c.MaxLabelSets
}

// maxNamedLabelSets returns the bound of label sets with a name,
// defaulted.
func (c *Configuration) maxNamedLabelSets() int {
	switch {
	case c.MaxNamedLabelSets != 0:
		return c.MaxNamedLabelSets
	case c.nameFor() == nil:
		return c.maxLabelSets()
	}
	return max(1, c.maxLabelSets()/2)
}

// idleExpiry returns the idle expiry, defaulted; 0 keeps label sets.
func (c *Configuration) idleExpiry() time.Duration {
	if c.IdleExpiry == "" {
		return DefaultIdleExpiry
	}
	d, _ := time.ParseDuration(c.IdleExpiry) // validated
	return d
}

// Validate returns the configuration's errors, each naming its field.
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, l := range c.Labels {
		p := field.NewPath("labels").Index(i)
		switch {
		case !slices.Contains(AllLabels, l):
			errs = append(errs, field.NotSupported(p, l, AllLabels))
		case seen[l]:
			errs = append(errs, field.Duplicate(p, l))
		}
		seen[l] = true
	}
	errs = append(errs, checkValues(field.NewPath("namespaces"), c.Namespaces)...)
	errs = append(errs, checkValues(field.NewPath("reasons"), c.Reasons)...)
	if c.MaxLabelSets < 0 || c.MaxLabelSets > MaxMaxLabelSets {
		errs = append(errs, field.Invalid(field.NewPath("maxLabelSets"), c.MaxLabelSets, fmt.Sprintf("must be between 1 and %d (0 or absent: %d)", MaxMaxLabelSets, DefaultMaxLabelSets)))
	}
	if c.NameFor != nil {
		p := field.NewPath("nameFor")
		switch {
		case !c.nameKept():
			errs = append(errs, field.Forbidden(p, "needs name among the labels"))
		case len(c.NameFor.Types) == 0 && len(c.NameFor.Reasons) == 0:
			errs = append(errs, field.Required(p, "name types or reasons (to keep name for every event, leave nameFor out and list name among the labels)"))
		}
		errs = append(errs, checkValues(p.Child("types"), c.NameFor.Types)...)
		errs = append(errs, checkValues(p.Child("reasons"), c.NameFor.Reasons)...)
	}
	if c.MaxNamedLabelSets != 0 {
		p := field.NewPath("maxNamedLabelSets")
		switch {
		case !c.nameKept():
			errs = append(errs, field.Forbidden(p, "needs name among the labels"))
		case c.MaxNamedLabelSets < 0 || c.MaxNamedLabelSets > c.maxLabelSets():
			errs = append(errs, field.Invalid(p, c.MaxNamedLabelSets, fmt.Sprintf("must be between 1 and maxLabelSets (%d)", c.maxLabelSets())))
		}
	}
	if c.IdleExpiry != "" {
		p := field.NewPath("idleExpiry")
		if d, err := time.ParseDuration(c.IdleExpiry); err != nil {
			errs = append(errs, field.Invalid(p, c.IdleExpiry, duration.Hint(c.IdleExpiry)))
		} else if d != 0 && d < MinIdleExpiry {
			errs = append(errs, field.Invalid(p, c.IdleExpiry, fmt.Sprintf("must be at least %v (or 0s: never)", MinIdleExpiry)))
		}
	}
	return errs
}

// checkValues refuses empty and repeated values of a list.
func checkValues(p *field.Path, values []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, v := range values {
		switch {
		case v == "":
			errs = append(errs, field.Invalid(p.Index(i), v, "must not be empty"))
		case v == OtherValue || v == OverflowValue:
			errs = append(errs, field.Invalid(p.Index(i), v, "is a marker value eventsd uses"))
		case seen[v]:
			errs = append(errs, field.Duplicate(p.Index(i), v))
		}
		seen[v] = true
	}
	return errs
}

// Decode reads a Configuration in YAML or JSON and validates it. Unknown
// and duplicate fields are errors.
func Decode(data []byte) (*Configuration, error) {
	c := &Configuration{}
	if err := configfile.DecodeValid(data, c, func() metav1.TypeMeta { return c.TypeMeta }, ConfigurationAPIVersion, ConfigurationKind); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadFile reads and decodes the configuration file at path; its errors
// name the file.
func LoadFile(path string) (*Configuration, error) {
	var c *Configuration
	err := configfile.Load(path, "event metrics config", func(data []byte) (err error) {
		c, err = Decode(data)
		return err
	})
	return c, err
}
