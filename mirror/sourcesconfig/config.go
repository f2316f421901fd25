package sourcesconfig

import (
	"fmt"
	"time"

	"github.com/kubevents/kubevents/internal/configfile"
	"github.com/kubevents/kubevents/internal/duration"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/storage/clusterview"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The apiVersion and kind a sources configuration file must declare.
const (
	ConfigurationAPIVersion = "eventsd.kubevents.io/v1alpha1"
	ConfigurationKind       = "SourcesConfiguration"
)

// Defaults of a source's client rate limits, also those of the single
// source's --source-qps and --source-burst: the mirror makes one watch
// and, at start or after a 410, a list of 500-event pages (a
// 100,000-event cluster in 200 requests), so a modest share of the
// source's priority level is enough.
const (
	DefaultQPS   = 20
	DefaultBurst = 40
)

// Configuration is the sources configuration file.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`
	// Sources are the clusters mirrored, each into its own part of the
	// store and served at /clusters/NAME/. At least one; names unique.
	Sources []Source `json:"sources"`
}

// Source is one mirrored cluster.
type Source struct {
	// Name is the cluster's name in the fleet: its path /clusters/NAME/,
	// its events' events.kubevents.io/cluster annotation in fleet-wide
	// answers, its label source on the mirror's metrics and its /readyz
	// check mirror-NAME. A DNS label (lower-case letters, digits and '-',
	// at most 63 characters). Required. The events are kept under the
	// name: a source removed (or renamed, which starts a new cluster)
	// leaves its events in the store until retention expires them, no
	// longer served at /clusters/OLD/ but still in /clusters/*/ (field
	// selector cluster=OLD), and mirrored on again, from its cursor, if a
	// source of that name returns.
	Name string `json:"name"`
	// Kubeconfig is the kubeconfig file of the cluster's kube-apiserver
	// (the mirror needs get, list and watch on events; the lineage, list
	// and watch of the objects events name). Exactly one of kubeconfig
	// and inCluster.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig's context to use; its current context
	// when empty.
	Context string `json:"context,omitempty"`
	// InCluster mirrors the cluster eventsd runs in, through its pod's
	// service account, instead of a kubeconfig.
	InCluster bool `json:"inCluster,omitempty"`
	// QPS is the requests per second the mirror may send to the source
	// (client-go's QPS); DefaultQPS (20) when 0.
	QPS float32 `json:"qps,omitempty"`
	// Burst is the requests the mirror may send at once above qps
	// (client-go's burst); DefaultBurst (40) when 0.
	Burst int `json:"burst,omitempty"`
	// Deletions is what a deletion in the source does: keep (the default:
	// the event stays until eventsd's retention expires it) or propagate
	// (it is deleted here too).
	Deletions mirror.DeletionPolicy `json:"deletions,omitempty"`
	// EventTTL is the source's --event-ttl, as a Go duration: after a
	// restart or a 410, how long the mirror was away beyond it is reported
	// as a gap. mirror.DefaultSourceTTL (1h) when empty.
	EventTTL string `json:"eventTTL,omitempty"`
	// InitialSync is how the source's events are read at start and after
	// a 410: auto (the default: a WatchList stream, or paginated lists
	// where the source refuses it), watchlist or list.
	InitialSync mirror.InitialSync `json:"initialSync,omitempty"`
}

// Validate returns the configuration's errors, each naming its source and
// field (sources[1].name).
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("sources")
	if len(c.Sources) == 0 {
		errs = append(errs, field.Required(p, "at least one source"))
	}
	names := map[string]int{}
	for i := range c.Sources {
		s := &c.Sources[i]
		sp := p.Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), "a DNS label naming the cluster, such as east"))
		} else if why := clusterview.ValidName(s.Name); why != "" {
			errs = append(errs, field.Invalid(sp.Child("name"), s.Name, why))
		} else if prev, dup := names[s.Name]; dup {
			errs = append(errs, field.Duplicate(sp.Child("name"), fmt.Sprintf("%s (also sources[%d].name)", s.Name, prev)))
		} else {
			names[s.Name] = i
		}
		switch {
		case s.InCluster && s.Kubeconfig != "":
			errs = append(errs, field.Invalid(sp.Child("inCluster"), true, "give kubeconfig or inCluster, not both"))
		case !s.InCluster && s.Kubeconfig == "":
			errs = append(errs, field.Required(sp.Child("kubeconfig"), "the cluster's kubeconfig file, or inCluster: true"))
		case s.InCluster && s.Context != "":
			errs = append(errs, field.Invalid(sp.Child("context"), s.Context, "a context goes with kubeconfig, not inCluster"))
		}
		if s.QPS < 0 {
			errs = append(errs, field.Invalid(sp.Child("qps"), s.QPS, "must be positive (0 or absent: 20)"))
		}
		if s.Burst < 0 {
			errs = append(errs, field.Invalid(sp.Child("burst"), s.Burst, "must be positive (0 or absent: 40)"))
		}
		switch s.Deletions {
		case "", mirror.DeletionsKeep, mirror.DeletionsPropagate:
		default:
			errs = append(errs, field.NotSupported(sp.Child("deletions"), s.Deletions, []mirror.DeletionPolicy{mirror.DeletionsKeep, mirror.DeletionsPropagate}))
		}
		switch s.InitialSync {
		case "", mirror.InitialSyncAuto, mirror.InitialSyncWatchList, mirror.InitialSyncList:
		default:
			errs = append(errs, field.NotSupported(sp.Child("initialSync"), s.InitialSync,
				[]mirror.InitialSync{mirror.InitialSyncAuto, mirror.InitialSyncWatchList, mirror.InitialSyncList}))
		}
		if s.EventTTL != "" {
			if d, err := time.ParseDuration(s.EventTTL); err != nil {
				errs = append(errs, field.Invalid(sp.Child("eventTTL"), s.EventTTL, duration.Hint(s.EventTTL)))
			} else if d <= 0 {
				errs = append(errs, field.Invalid(sp.Child("eventTTL"), s.EventTTL, "must be positive"))
			}
		}
	}
	return errs
}

// WithDefaults returns the source with every unset field at its default.
func (s Source) WithDefaults() Source {
	if s.QPS == 0 {
		s.QPS = DefaultQPS
	}
	if s.Burst == 0 {
		s.Burst = DefaultBurst
	}
	if s.Deletions == "" {
		s.Deletions = mirror.DeletionsKeep
	}
	if s.InitialSync == "" {
		s.InitialSync = mirror.InitialSyncAuto
	}
	if s.EventTTL == "" {
		s.EventTTL = mirror.DefaultSourceTTL.String()
	}
	return s
}

// TTL returns the source's eventTTL as a duration: mirror.DefaultSourceTTL
// when unset (or, in a configuration that did not validate, unreadable).
func (s Source) TTL() time.Duration {
	d, err := time.ParseDuration(s.EventTTL)
	if err != nil || d <= 0 {
		return mirror.DefaultSourceTTL
	}
	return d
}

// Decode reads a Configuration in YAML or JSON and validates it. Unknown
// and duplicate fields are errors, so that a misspelt key is not silently
// ignored.
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
	err := configfile.Load(path, "sources config", func(data []byte) (err error) {
		c, err = Decode(data)
		return err
	})
	return c, err
}
