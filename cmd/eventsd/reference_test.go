package main

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/eventmetrics"
	"github.com/kubevents/kubevents/export/exportconfig"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/internal/refdoc"
	"github.com/kubevents/kubevents/mirror/sourcesconfig"
	"github.com/kubevents/kubevents/retention"
)

var update = flag.Bool("update", false, "rewrite docs/reference/eventsd.md and configuration.md from the code")

// regenerate is the command that rewrites this package's reference pages.
const regenerate = "go test ./cmd/eventsd -run TestReferenceDoc -update"

// configKinds are the configuration files eventsd reads, as
// docs/reference/configuration.md describes them.
var configKinds = []refdoc.Kind{{
	Title: retention.ConfigurationKind,
	Intro: "The file of `--retention-config`: ordered rules giving the events they match another TTL than `--event-ttl`. " +
		"YAML or JSON, read strictly (an unknown or repeated field stops eventsd from starting). " +
		"See [Keep events longer](../keep-events-longer.md#retention-rules).",
	APIVersion: retention.ConfigurationAPIVersion, Kind: retention.ConfigurationKind,
	Package: "github.com/kubevents/kubevents/retention", Type: "Configuration",
}, {
	Title: fold.ConfigurationKind,
	Intro: "The file of `--fold-config`: ordered rules under which a create repeating a stored event is folded into it. " +
		"Read as the retention rules are. See [Folding and rate limits](../folding-and-rate-limits.md#folding-repeats-on-the-server).",
	APIVersion: fold.ConfigurationAPIVersion, Kind: fold.ConfigurationKind,
	Package: "github.com/kubevents/kubevents/fold", Type: "Configuration",
}, {
	Title: exportconfig.ConfigurationKind,
	Intro: "The file of `--export-config`: the sinks every matching event change is sent to. " +
		"Each sink has exactly one of `webhook`, `otlp` and `file`. Read as the retention rules are. See [Export](../export.md).",
	APIVersion: exportconfig.ConfigurationAPIVersion, Kind: exportconfig.ConfigurationKind,
	Package: "github.com/kubevents/kubevents/export/exportconfig", Type: "Configuration",
}, {
	Title: eventmetrics.ConfigurationKind,
	Intro: "The file of `--event-metrics-config`: the labels (and which events carry the object's name), kept values, maximum numbers of label sets and idle expiry of `eventsd_event_occurrences_total`. " +
		"Read as the retention rules are. See [Alerting on events](../alerting-on-events.md).",
	APIVersion: eventmetrics.ConfigurationAPIVersion, Kind: eventmetrics.ConfigurationKind,
	Package: "github.com/kubevents/kubevents/eventmetrics", Type: "Configuration",
}, {
	Title: sourcesconfig.ConfigurationKind,
	Intro: "The file of `--sources-config`: the clusters one eventsd mirrors, each served at `/clusters/NAME/`. " +
		"Read as the retention rules are. See [Mirror a fleet](../mirror-a-fleet.md).",
	APIVersion: sourcesconfig.ConfigurationAPIVersion, Kind: sourcesconfig.ConfigurationKind,
	Package: "github.com/kubevents/kubevents/mirror/sourcesconfig", Type: "Configuration",
}, {
	Title: "EventRateLimit",
	Intro: "The file of `--admission-control-config-file` is kube-apiserver's `AdmissionConfiguration` (`apiserver.config.k8s.io/v1`): " +
		"eventsd reads its plugin entry named `" + eventratelimit.PluginName + "`, whose `configuration` holds the object below inline " +
		"(or whose `path` names a file holding it, relative to the AdmissionConfiguration), and ignores the other plugins' entries. " +
		"Keys, defaults and validation are upstream's. See [Folding and rate limits](../folding-and-rate-limits.md#event-rate-limits).",
	APIVersion: eventratelimit.ConfigurationAPIVersion, Kind: eventratelimit.ConfigurationKind,
	Package: "github.com/kubevents/kubevents/admission/eventratelimit", Type: "Configuration",
}}

// TestReferenceDoc: docs/reference/eventsd.md lists every flag of eventsd
// and docs/reference/configuration.md every field of the files it reads,
// as the code has them now.
func TestReferenceDoc(t *testing.T) {
	root := filepath.Join("..", "..")
	refdoc.Check(t, filepath.Join(root, "docs", "reference", "eventsd.md"), refdoc.Commands(newCommand(), regenerate), *update, regenerate)

	page, err := refdoc.Configuration(root, "Configuration files",
		"Every configuration file eventsd reads, with every field: its key, its type and what it means (defaults included). "+
			"Durations are Go durations (`90s`, `10m`, `168h`; there is no `d` unit). Flags are in [eventsd](eventsd.md).",
		regenerate, configKinds)
	if err != nil {
		t.Fatal(err)
	}
	refdoc.Check(t, filepath.Join(root, "docs", "reference", "configuration.md"), page, *update, regenerate)
}
