package retention

import (
	"fmt"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/internal/configfile"
	"github.com/kubevents/kubevents/internal/duration"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apiVersion and kind a retention configuration file must declare.
const (
	ConfigurationAPIVersion = "eventsd.kubevents.io/v1alpha1"
	ConfigurationKind       = "RetentionConfiguration"
)

// DefaultRuleName is the rule name Policy.TTL reports for an event no rule
// matched, which keeps the default TTL.
const DefaultRuleName = "default"

// Configuration is the retention configuration file.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`
	// Rules are tried in order; the first matching an event gives its TTL.
	Rules []Rule `json:"rules"`
}

// Rule matches events and gives their TTL. Each empty list matches any
// value; a rule matches an event when every non-empty list contains the
// event's value.
type Rule struct {
	// Name, optional, names the rule in metrics; the rule's index
	// otherwise.
	Name string `json:"name,omitempty"`
	// Clusters are the clusters of a fleet (--sources-config) whose
	// events the rule matches, by name; "" names the root cluster (the
	// events written to eventsd itself, or mirrored from its only
	// source). Empty: every cluster's, the root's included.
	Clusters clusterview.Names `json:"clusters,omitempty"`
	// Criteria are the rule's namespaces, types, reasons and reporting
	// controllers.
	eventapi.Criteria `json:",inline"`
	// TTL is how long a matching event lives after each write: a
	// positive Go duration such as 168h, 24h or 90m. Required.
	TTL string `json:"ttl"`
}

// Validate returns the configuration's errors, each naming its rule and
// field (rules[1].ttl).
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	names := map[string]int{}
	for i := range c.Rules {
		r := &c.Rules[i]
		p := field.NewPath("rules").Index(i)
		if r.TTL == "" {
			errs = append(errs, field.Required(p.Child("ttl"), "a duration such as 24h"))
		} else if d, err := time.ParseDuration(r.TTL); err != nil {
			errs = append(errs, field.Invalid(p.Child("ttl"), r.TTL, duration.Hint(r.TTL)))
		} else if d <= 0 {
			errs = append(errs, field.Invalid(p.Child("ttl"), r.TTL, "must be positive"))
		}
		errs = append(errs, r.Clusters.Validate(p.Child("clusters"))...)
		errs = append(errs, r.Criteria.Validate(p)...)
		if r.Name != "" {
			if prev, dup := names[r.Name]; dup {
				errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also rules[%d].name)", r.Name, prev)))
			}
			names[r.Name] = i
			if r.Name == DefaultRuleName {
				errs = append(errs, field.Invalid(p.Child("name"), r.Name, "is reserved for events no rule matches"))
			}
		}
	}
	return errs
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
	err := configfile.Load(path, "retention config", func(data []byte) (err error) {
		c, err = Decode(data)
		return err
	})
	return c, err
}

// Policy chooses the TTL of each event write; build it with NewPolicy.
// It is immutable, safe for concurrent use.
type Policy struct {
	rules      []Rule
	ttls       []time.Duration
	names      []string
	defaultTTL time.Duration
}

// NewPolicy returns the policy of c's rules, with defaultTTL for events no
// rule matches; a nil c gives every event defaultTTL. It validates c.
func NewPolicy(c *Configuration, defaultTTL time.Duration) (*Policy, error) {
	p := &Policy{defaultTTL: defaultTTL}
	if c == nil {
		return p, nil
	}
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s: %w", ConfigurationKind, errs.ToAggregate())
	}
	p.rules = slices.Clone(c.Rules)
	for i, r := range p.rules {
		d, _ := time.ParseDuration(r.TTL) // validated above
		p.ttls = append(p.ttls, d)
		name := r.Name
		if name == "" {
			name = strconv.Itoa(i)
		}
		p.names = append(p.names, name)
	}
	return p, nil
}

// RuleNames are the names TTL reports, in rule order, then
// DefaultRuleName.
func (p *Policy) RuleNames() []string {
	return append(slices.Clone(p.names), DefaultRuleName)
}

// TTL returns the TTL of a write of ev, an event of the root cluster,
// and the name of the rule that chose it: ClusterTTL("", ev).
func (p *Policy) TTL(ev *corev1.Event) (time.Duration, string) {
	return p.ClusterTTL("", ev)
}

// ClusterTTL returns the TTL of a write of ev, an event of cluster
// cluster ("" the root cluster) with that cluster's own namespace (not
// its storage namespace), and the name of the rule that chose it: the
// first matching rule's name (its index when unnamed), or
// DefaultRuleName and the default TTL.
func (p *Policy) ClusterTTL(cluster string, ev *corev1.Event) (time.Duration, string) {
	for i := range p.rules {
		if p.rules[i].Clusters.Matches(cluster) && p.rules[i].Matches(ev) {
			return p.ttls[i], p.names[i]
		}
	}
	return p.defaultTTL, DefaultRuleName
}

// StoredTTL is ClusterTTL of an event as the store holds it: its
// namespace a storage namespace (storage.ClusterNamespace), which names
// its cluster. What reads the store itself (the storage budget naming
// the rule of an event it expires) asks this.
func (p *Policy) StoredTTL(ev *corev1.Event) (time.Duration, string) {
	cluster, ns := storage.SplitClusterNamespace(ev.Namespace)
	if cluster != "" {
		cp := *ev // shallow: only the namespace differs
		cp.Namespace = ns
		ev = &cp
	}
	return p.ClusterTTL(cluster, ev)
}
