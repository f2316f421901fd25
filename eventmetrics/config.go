package eventmetrics

import (
	"fmt"
	"slices"

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
	// LabelName is the regarding object's name: not kept by default (one
	// series per object), named in Configuration.Labels to let alerts
	// and dashboards name the object.
	LabelName = "name"
)

// AllLabels are the labels an occurrence can carry, in export order.
var AllLabels = []string{LabelNamespace, LabelType, LabelReason, LabelKind, LabelReportingController, LabelName}

// DefaultLabels are the labels kept when the configuration names none:
// all but the object's name.
var DefaultLabels = []string{LabelNamespace, LabelType, LabelReason, LabelKind, LabelReportingController}

// DefaultMaxLabelSets bounds the label sets of the occurrence counter
// when the configuration does not: a thousand series cost a scrape about
// 150 KB of text (see BENCHMARKS.md) and the server a few hundred KB.
const DefaultMaxLabelSets = 1000

// MaxMaxLabelSets is the largest maxLabelSets accepted: beyond it a
// scrape grows past tens of MB, which Prometheus' default scrape limits
// and eventsd's memory should not be asked for.
const MaxMaxLabelSets = 100000

// Configuration is the event metrics configuration file. Its zero value
// (no file) is the default: DefaultLabels, every namespace and reason its
// own value, DefaultMaxLabelSets.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`
	// Labels are the labels kept, among namespace, type, reason, kind,
	// reporting_controller and name (the regarding object's); empty
	// keeps all but name. A label left out is not exported: its values
	// are summed. name makes a series per object: with it, alerts name
	// the object, and maxLabelSets should be raised to the objects
	// expected.
	Labels []string `json:"labels,omitempty"`
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
