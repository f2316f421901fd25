package fold

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/configfile"
	"github.com/kubevents/kubevents/internal/duration"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apiVersion and kind a fold configuration file must declare.
const (
	ConfigurationAPIVersion = "eventsd.kubevents.io/v1alpha1"
	ConfigurationKind       = "FoldConfiguration"
)

// MaxWindow bounds a rule's window: a window longer than a day folds
// repeats into an event older than any default TTL would keep, which is
// more likely a mistake (24 in place of 24h is refused as not a
// duration; 2400h as too long).
const MaxWindow = 24 * time.Hour

// Configuration is the fold configuration file.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`
	// Rules are tried in order; the first matching a created event
	// decides whether and within which window it is folded.
	Rules []Rule `json:"rules"`
}

// Rule matches events and gives the window of their folding. Each empty
// list matches any value; a rule matches an event when every non-empty
// list contains the event's value.
type Rule struct {
	// Name, optional, names the rule in metrics; the rule's index
	// otherwise.
	Name string `json:"name,omitempty"`
	// Criteria are the rule's namespaces, types, reasons and reporting
	// controllers.
	eventapi.Criteria `json:",inline"`
	// Window is how long after a stored event was last observed an
	// isomorphic create is still folded into it: a positive Go duration
	// of at most 24h, such as 10m. Required.
	Window string `json:"window"`
}

// Validate returns the configuration's errors, each naming its rule and
// field (rules[1].window).
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	names := map[string]int{}
	for i := range c.Rules {
		r := &c.Rules[i]
		p := field.NewPath("rules").Index(i)
		if r.Window == "" {
			errs = append(errs, field.Required(p.Child("window"), "a duration such as 10m"))
		} else if d, err := time.ParseDuration(r.Window); err != nil {
			errs = append(errs, field.Invalid(p.Child("window"), r.Window, duration.Hint(r.Window)))
		} else if d <= 0 {
			errs = append(errs, field.Invalid(p.Child("window"), r.Window, "must be positive"))
		} else if d > MaxWindow {
			errs = append(errs, field.Invalid(p.Child("window"), r.Window, fmt.Sprintf("must be at most %v", MaxWindow)))
		}
		errs = append(errs, r.Criteria.Validate(p)...)
		// An unnamed rule is named by its index in logs and metrics:
		// that name is taken too.
		name := RuleName(r.Name, i)
		if prev, dup := names[name]; dup {
			errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (%s; also %s)", name, nameOf(r.Name, i), nameOf(c.Rules[prev].Name, prev))))
		}
		names[name] = i
	}
	return errs
}

// RuleName is the name of the rule at index i, named name, in logs and
// metrics: its own, or its index when it has none.
func RuleName(name string, i int) string {
	if name == "" {
		return strconv.Itoa(i)
	}
	return name
}

// nameOf says where rule i's name comes from, for an error.
func nameOf(name string, i int) string {
	if name == "" {
		return fmt.Sprintf("rules[%d] is unnamed, so named by its index", i)
	}
	return fmt.Sprintf("rules[%d].name", i)
}

// Decode reads a Configuration in YAML or JSON and validates it. Unknown
// and duplicate fields are errors, so that a misspelt key is not silently
// "any".
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
	err := configfile.Load(path, "fold config", func(data []byte) (err error) {
		c, err = Decode(data)
		return err
	})
	return c, err
}

// Policy holds the rules in force; build it with NewPolicy. It is
// immutable, safe for concurrent use. A nil *Policy folds nothing.
type Policy struct {
	rules   []Rule
	windows []time.Duration
	names   []string
}

// NewPolicy returns the policy of c's rules; a nil c gives a nil policy,
// which folds nothing. It validates c.
func NewPolicy(c *Configuration) (*Policy, error) {
	if c == nil {
		return nil, nil
	}
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s: %w", ConfigurationKind, errs.ToAggregate())
	}
	p := &Policy{rules: slices.Clone(c.Rules)}
	for i, r := range p.rules {
		d, _ := time.ParseDuration(r.Window) // validated above
		p.windows = append(p.windows, d)
		p.names = append(p.names, RuleName(r.Name, i))
	}
	return p, nil
}

// RuleNames are the names Match reports, in rule order.
func (p *Policy) RuleNames() []string {
	if p == nil {
		return nil
	}
	return slices.Clone(p.names)
}

// Match returns the first rule ev matches: its name (its index when
// unnamed) and window; ok is false when no rule matches (or p is nil),
// and ev is then stored as it is.
func (p *Policy) Match(ev *corev1.Event) (rule string, window time.Duration, ok bool) {
	if p == nil {
		return "", 0, false
	}
	for i := range p.rules {
		if p.rules[i].Matches(ev) {
			return p.names[i], p.windows[i], true
		}
	}
	return "", 0, false
}
