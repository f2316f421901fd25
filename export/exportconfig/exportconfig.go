// Package exportconfig reads eventsd's --export-config file, an
// ExportConfiguration (eventsd.kubevents.io/v1alpha1) naming the sinks
// event changes are exported to, each with its filter and batching, and
// builds the sinks.
package exportconfig

import (
	"errors"
	"fmt"

	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/file"
	"github.com/kubevents/kubevents/export/otlp"
	"github.com/kubevents/kubevents/export/webhook"
	"github.com/kubevents/kubevents/internal/configfile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apiVersion and kind an export configuration file must declare.
const (
	ConfigurationAPIVersion = "eventsd.kubevents.io/v1alpha1"
	ConfigurationKind       = "ExportConfiguration"
)

// The sink types, as logged and documented.
const (
	TypeWebhook = "webhook"
	TypeOTLP    = "otlp"
	TypeFile    = "file"
)

// Configuration is the export configuration file.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`
	// Sinks are the destinations; each gets every matching change.
	Sinks []Sink `json:"sinks"`
}

// Sink is one destination: a name, what it gets, how it is batched, and
// exactly one of webhook, otlp and file.
type Sink struct {
	// Name names the sink in metrics and logs, and its cursor in the
	// store: a DNS label, unique in the file. Renaming a sink starts it
	// afresh (from the store's current revision).
	Name string `json:"name"`
	// Filter selects the changes the sink gets; empty: every create and
	// update, no deletions.
	Filter export.Filter `json:"filter,omitempty"`
	// Batch bounds the batches sent.
	Batch Batch `json:"batch,omitempty"`
	// Webhook POSTs batches of JSON records (or Slack messages).
	Webhook *webhook.Config `json:"webhook,omitempty"`
	// OTLP sends OpenTelemetry log records to a collector.
	OTLP *otlp.Config `json:"otlp,omitempty"`
	// File appends JSON lines to a file, rotated by size.
	File *file.Config `json:"file,omitempty"`
}

// Batch bounds a sink's batches.
type Batch struct {
	// MaxRecords is the most records one batch holds; default
	// export.DefaultMaxBatch (500).
	MaxRecords int `json:"maxRecords,omitempty"`
	// MaxWait is how long a change waits for others to share its batch,
	// as a Go duration; default export.DefaultMaxWait (1s).
	MaxWait metav1.Duration `json:"maxWait,omitempty"`
}

// typeOf returns the sink's type, and how many types it set.
func (s *Sink) typeOf() (string, int) {
	t, n := "", 0
	if s.Webhook != nil {
		t, n = TypeWebhook, n+1
	}
	if s.OTLP != nil {
		t, n = TypeOTLP, n+1
	}
	if s.File != nil {
		t, n = TypeFile, n+1
	}
	return t, n
}

// Validate returns the configuration's errors, each naming its sink and
// field (sinks[1].webhook.url).
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	if len(c.Sinks) == 0 {
		errs = append(errs, field.Required(field.NewPath("sinks"), "at least one sink"))
	}
	names := map[string]int{}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		p := field.NewPath("sinks").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "a DNS label naming the sink"))
		} else {
			for _, msg := range validation.IsDNS1123Label(s.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
			if prev, dup := names[s.Name]; dup {
				errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also sinks[%d].name)", s.Name, prev)))
			}
			names[s.Name] = i
		}
		errs = append(errs, s.Filter.Validate(p.Child("filter"))...)
		if s.Batch.MaxRecords < 0 {
			errs = append(errs, field.Invalid(p.Child("batch", "maxRecords"), s.Batch.MaxRecords, "must not be negative"))
		}
		if s.Batch.MaxWait.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child("batch", "maxWait"), s.Batch.MaxWait.Duration.String(), "must not be negative"))
		}
		switch _, n := s.typeOf(); {
		case n == 0:
			errs = append(errs, field.Required(p, "one of webhook, otlp or file"))
		case n > 1:
			errs = append(errs, field.Forbidden(p, "only one of webhook, otlp or file"))
		}
		if s.Webhook != nil {
			errs = append(errs, s.Webhook.Validate(p.Child("webhook"))...)
		}
		if s.OTLP != nil {
			errs = append(errs, s.OTLP.Validate(p.Child("otlp"))...)
		}
		if s.File != nil {
			errs = append(errs, s.File.Validate(p.Child("file"))...)
		}
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
	err := configfile.Load(path, "export config", func(data []byte) (err error) {
		c, err = Decode(data)
		return err
	})
	return c, err
}

// BuildOptions are what the sinks need beyond the file.
type BuildOptions struct {
	// Version is eventsd's version, sent by the sinks that say who sends.
	Version string
}

// Build creates the configured sinks. On error, those already created
// are closed.
func (c *Configuration) Build(opts BuildOptions) ([]export.SinkSpec, error) {
	var specs []export.SinkSpec
	fail := func(err error) ([]export.SinkSpec, error) {
		for _, s := range specs {
			err = errors.Join(err, s.Sink.Close())
		}
		return nil, err
	}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		typ, _ := s.typeOf()
		var sink export.Sink
		var err error
		switch typ {
		case TypeWebhook:
			sink, err = webhook.New(*s.Webhook, webhook.Options{UserAgent: "eventsd/" + opts.Version})
		case TypeOTLP:
			sink, err = otlp.New(*s.OTLP, otlp.Options{Version: opts.Version})
		case TypeFile:
			sink, err = file.New(*s.File, file.Options{})
		default:
			err = errors.New("no sink type")
		}
		if err != nil {
			return fail(fmt.Errorf("sink %q: %w", s.Name, err))
		}
		specs = append(specs, export.SinkSpec{Name: s.Name, Type: typ, Sink: sink, Filter: s.Filter,
			MaxBatch: s.Batch.MaxRecords, MaxWait: s.Batch.MaxWait.Duration})
	}
	return specs, nil
}
