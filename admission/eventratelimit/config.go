package eventratelimit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

// Names in upstream's configuration format.
const (
	// PluginName is the name of the plugin entry in an
	// AdmissionConfiguration, as kube-apiserver's.
	PluginName = "EventRateLimit"
	// ConfigurationAPIVersion and ConfigurationKind identify the plugin's
	// Configuration object.
	ConfigurationAPIVersion = "eventratelimit.admission.k8s.io/v1alpha1"
	ConfigurationKind       = "Configuration"
	// DefaultCacheSize is the number of buckets a Namespace, User or
	// SourceAndObject limit keeps when its cacheSize is 0 or unset,
	// upstream's default. The least recently used bucket is dropped
	// beyond it, and comes back full.
	DefaultCacheSize = 4096
)

// LimitType is the kind of bucket a limit keeps.
type LimitType string

// The limit types, upstream's.
const (
	// ServerLimitType is one bucket for every event the server takes.
	ServerLimitType LimitType = "Server"
	// NamespaceLimitType is a bucket per namespace.
	NamespaceLimitType LimitType = "Namespace"
	// UserLimitType is a bucket per user name.
	UserLimitType LimitType = "User"
	// SourceAndObjectLimitType is a bucket per event source (reporting
	// controller and instance) and involved object.
	SourceAndObjectLimitType LimitType = "SourceAndObject"
)

// limitTypes are the supported types, in the order refusals are reported.
var limitTypes = []LimitType{ServerLimitType, NamespaceLimitType, UserLimitType, SourceAndObjectLimitType}

// Configuration is upstream's eventratelimit.admission.k8s.io/v1alpha1
// Configuration, with its wire keys.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`
	// Limits are the limits to apply; at least one is required.
	Limits []Limit `json:"limits"`
}

// Limit is one token-bucket limit: each bucket holds up to Burst tokens
// and gains QPS tokens a second; a write takes one.
type Limit struct {
	// Type is the kind of bucket: Server, Namespace, User or
	// SourceAndObject.
	Type LimitType `json:"type"`
	// QPS is the rate at which each bucket refills, in writes a second.
	QPS int32 `json:"qps"`
	// Burst is the size of each bucket.
	Burst int32 `json:"burst"`
	// CacheSize bounds the number of buckets kept (DefaultCacheSize when
	// 0); ignored for Server.
	CacheSize int32 `json:"cacheSize,omitempty"`
}

// Validate checks c as upstream does: at least one limit, known types,
// positive qps and burst, a cacheSize that is not negative.
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	limitsPath := field.NewPath("limits")
	if len(c.Limits) == 0 {
		errs = append(errs, field.Invalid(limitsPath, c.Limits, "must not be empty"))
	}
	supported := make([]string, len(limitTypes))
	for i, t := range limitTypes {
		supported[i] = string(t)
	}
	for i, l := range c.Limits {
		p := limitsPath.Index(i)
		known := false
		for _, t := range limitTypes {
			known = known || l.Type == t
		}
		if !known {
			errs = append(errs, field.NotSupported(p.Child("type"), l.Type, supported))
		}
		if l.Burst <= 0 {
			errs = append(errs, field.Invalid(p.Child("burst"), l.Burst, "must be positive"))
		}
		if l.QPS <= 0 {
			errs = append(errs, field.Invalid(p.Child("qps"), l.QPS, "must be positive"))
		}
		if l.Type != ServerLimitType && l.CacheSize < 0 {
			errs = append(errs, field.Invalid(p.Child("cacheSize"), l.CacheSize, "must not be negative"))
		}
	}
	return errs
}

// DecodeConfiguration reads a Configuration in YAML or JSON and validates
// it. Unknown fields are errors, so that a misspelt key is not silently a
// zero.
func DecodeConfiguration(data []byte) (*Configuration, error) {
	c := &Configuration{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", PluginName, err)
	}
	if c.APIVersion != ConfigurationAPIVersion || c.Kind != ConfigurationKind {
		return nil, fmt.Errorf("decoding %s: want apiVersion %s, kind %s; found apiVersion %q, kind %q",
			PluginName, ConfigurationAPIVersion, ConfigurationKind, c.APIVersion, c.Kind)
	}
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s configuration: %w", PluginName, errs.ToAggregate())
	}
	return c, nil
}

// ErrNoPluginEntry is returned by LoadAdmissionConfigFile when the file has
// no EventRateLimit entry.
var ErrNoPluginEntry = errors.New("no " + PluginName + " plugin entry")

// LoadAdmissionConfigFile reads kube-apiserver's --admission-control-config-file:
// an AdmissionConfiguration (apiserver.config.k8s.io/v1) whose
// EventRateLimit entry holds the Configuration inline (configuration) or
// names a file holding it (path, relative to the AdmissionConfiguration's
// directory); inline wins, as upstream. Entries for other plugins are
// returned in ignored, for the caller to mention.
func LoadAdmissionConfigFile(path string) (c *Configuration, ignored []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("admission control config file: %w", err)
	}
	c, ignored, err = decodeAdmissionConfiguration(data, filepath.Dir(path))
	if err != nil {
		return nil, ignored, fmt.Errorf("admission control config file %s: %w", path, err)
	}
	return c, ignored, nil
}

func decodeAdmissionConfiguration(data []byte, baseDir string) (*Configuration, []string, error) {
	scheme := runtime.NewScheme()
	if err := apiserverv1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	obj, _, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	ac, ok := obj.(*apiserverv1.AdmissionConfiguration)
	if !ok {
		return nil, nil, fmt.Errorf("want an AdmissionConfiguration (%s), found %T", apiserverv1.SchemeGroupVersion, obj)
	}
	var (
		ignored []string
		entry   *apiserverv1.AdmissionPluginConfiguration
	)
	for i := range ac.Plugins {
		p := &ac.Plugins[i]
		if p.Name != PluginName {
			ignored = append(ignored, p.Name)
			continue
		}
		if entry != nil {
			return nil, ignored, fmt.Errorf("more than one %s plugin entry", PluginName)
		}
		entry = p
	}
	if entry == nil {
		return nil, ignored, ErrNoPluginEntry
	}
	var raw []byte
	switch {
	case entry.Configuration != nil:
		raw = entry.Configuration.Raw
	case entry.Path != "":
		p := entry.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(baseDir, p)
		}
		if raw, err = os.ReadFile(p); err != nil {
			return nil, ignored, fmt.Errorf("%s configuration: %w", PluginName, err)
		}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		// Upstream then validates an empty Configuration.
		c := &Configuration{}
		return nil, ignored, fmt.Errorf("invalid %s configuration: %w", PluginName, c.Validate().ToAggregate())
	}
	c, err := DecodeConfiguration(raw)
	return c, ignored, err
}
