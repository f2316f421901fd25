package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/lineage"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/mirror/sourcesconfig"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
)

// fleetSource is one source of --sources-config: its cluster's name in
// the fleet, its client and how it is mirrored.
type fleetSource struct {
	name     string
	src      *source
	settings mirrorSettings
}

// sourcesFlags are the single source's flags, which --sources-config
// replaces: each source of the file has their equivalents.
var sourcesFlags = []string{"source", "source-kubeconfig", "source-context", "source-qps", "source-burst", "source-deletions", "source-event-ttl", "source-initial-sync"}

// checkSourcesFlags refuses --sources-config beside the single source's
// flags (changed names the flags given).
func checkSourcesFlags(o options, changed func(string) bool) error {
	if o.sourcesConfig == "" {
		return nil
	}
	var given []string
	for _, f := range sourcesFlags {
		if changed(f) {
			given = append(given, "--"+f)
		}
	}
	if len(given) > 0 {
		return fmt.Errorf("--sources-config lists the sources, each with its own settings: give it or %s, not both", strings.Join(given, ", "))
	}
	if o.lineageKubeconfig != "" {
		return errors.New("--lineage-kubeconfig goes with a single cluster: with --sources-config each source's lineage follows its own cluster")
	}
	return nil
}

// buildFleet reads --sources-config and builds each source's client,
// before the store is opened: a bad file or kubeconfig is one error
// naming the source, with nothing created on disk.
func buildFleet(path string, allowExisting bool) ([]*fleetSource, error) {
	c, err := sourcesconfig.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sources-config: %w", err)
	}
	fleet := make([]*fleetSource, 0, len(c.Sources))
	for i, s := range c.Sources {
		s = s.WithDefaults()
		where := fmt.Sprintf("--sources-config %s: sources[%d] (%s)", path, i, s.Name)
		cfg, desc, err := fleetRestConfig(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		src, err := newSource(cfg, fmt.Sprintf("%s, %s", s.Name, desc), s.QPS, s.Burst)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		fleet = append(fleet, &fleetSource{name: s.Name, src: src, settings: mirrorSettings{
			deletions: s.Deletions, initialSync: s.InitialSync, eventTTL: s.TTL(), allowExisting: allowExisting,
			what: where,
		}})
	}
	return fleet, nil
}

// fleetRestConfig is the client configuration of a source of the file,
// and how logs name it.
func fleetRestConfig(s sourcesconfig.Source) (*rest.Config, string, error) {
	if s.InCluster {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("inCluster: %w", err)
		}
		return c, "in-cluster", nil
	}
	c, ctxName, err := loadKubeconfig(s.Kubeconfig, s.Context, "kubeconfig", "context")
	if err != nil {
		return nil, "", err
	}
	return c, fmt.Sprintf("context %q of %s", ctxName, s.Kubeconfig), nil
}

// fleetMirror is one source's mirror into its cluster's view of the
// store, with its lineage.
type fleetMirror struct {
	name    string
	mirror  *mirror.Mirror
	lineage *runningLineage
	check   *sourceCheck
}

// sourceCheck is a fleet source's /readyz check, mirror-NAME, so that
// ?exclude=mirror-NAME leaves one source out; it reports the source's
// refusal (the source is this eventsd) once the mirror has stopped for
// it.
type sourceCheck struct {
	name   string
	mirror *mirror.Mirror
	mu     sync.Mutex
	// refused is why the mirror stopped for good, if it did.
	refused error
}

// Name implements healthz.HealthChecker.
func (c *sourceCheck) Name() string { return c.name }

// Check implements healthz.HealthChecker.
func (c *sourceCheck) Check(r *http.Request) error {
	c.mu.Lock()
	refused := c.refused
	c.mu.Unlock()
	if refused != nil {
		return refused
	}
	return c.mirror.Check(r)
}

// setRefused records why the mirror stopped for good.
func (c *sourceCheck) setRefused(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused = err
}

// readOnlyMessage is what a mirrored cluster's API answers writes with.
func readOnlyMessage(src *source) string {
	return fmt.Sprintf("eventsd mirrors the events of a cluster (%s): they are read-only here; write events to that cluster's kube-apiserver", src.name)
}

// startFleet builds each source's mirror into its cluster's view of
// store (checking the view holds no events another wrote), its writes
// given their TTL by ttl and each stored write told to stored (both with
// the source's cluster and the event in the cluster's own namespace),
// and, with lineage on, its lineage over that view following the
// source's object metadata. Each source's metrics carry the label
// source=NAME. What it started before an error is returned too, to be
// stopped.
func startFleet(ctx context.Context, fleet []*fleetSource, o options, store storage.Interface,
	ttl func(cluster string, ev *corev1.Event) time.Duration, stored func(cluster string, ev *corev1.Event),
	reg prometheus.Registerer, log *slog.Logger, instanceID string) ([]*fleetMirror, error) {
	var fms []*fleetMirror
	for _, fs := range fleet {
		view := clusterview.New(store, fs.name)
		sreg := prometheus.WrapRegistererWith(prometheus.Labels{"source": fs.name}, reg)
		slg := log.With("source", fs.name)
		cluster := fs.name
		m, err := newMirror(fs.src, fs.settings, view,
			func(ev *corev1.Event) time.Duration { return ttl(cluster, ev) }, func(ev *corev1.Event) { stored(cluster, ev) },
			sreg, slg, instanceID)
		if err != nil {
			return fms, err
		}
		if err := m.CheckStore(ctx); err != nil {
			var ee *mirror.ExistingEventsError
			if errors.As(err, &ee) {
				return fms, fmt.Errorf("%s: cluster %s of %s: %w; remove the source's events, or give --%s to mirror into it anyway", fs.settings.what, fs.name, o.storeName(), err, allowExistingFlag)
			}
			return fms, fmt.Errorf("%s: %w", fs.settings.what, err)
		}
		fm := &fleetMirror{name: fs.name, mirror: m, check: &sourceCheck{name: "mirror-" + fs.name, mirror: m}}
		fms = append(fms, fm)
		if o.lineage {
			if fm.lineage, err = startLineage(ctx, view, fs.src.cfg, sreg, slg); err != nil {
				return fms, fmt.Errorf("%s: %w", fs.settings.what, err)
			}
		}
		log.Info("mirroring a cluster's events", "cluster", fs.name, "path", server.ClustersPathPrefix+fs.name+"/", "source", fs.src.name,
			"server", fs.src.cfg.Host, "deletions", fs.settings.deletions, "initialSync", fs.settings.initialSync)
	}
	return fms, nil
}

// serveFleet adds the fleet's clusters and readiness checks to the server's
// configuration; the root serves the only cluster when there is one, and
// is read-only otherwise (its own events, if any, from before eventsd
// mirrored a fleet, stay readable).
func serveFleet(scfg *server.Config, fleet []*fleetSource, fms []*fleetMirror) {
	names := make([]string, 0, len(fleet))
	for i, fs := range fleet {
		c := server.Cluster{Name: fs.name, ReadOnly: readOnlyMessage(fs.src)}
		if fms[i].lineage != nil {
			c.Lineage = fms[i].lineage.graph
		} else {
			off := lineage.New(lineage.Options{})
			off.SetLearning("ownership is not learned: eventsd runs with --lineage=false")
			c.Lineage = off
		}
		scfg.Clusters = append(scfg.Clusters, c)
		scfg.ReadyChecks = append(scfg.ReadyChecks, fms[i].check)
		names = append(names, fs.name)
	}
	if len(fleet) == 1 {
		scfg.RootCluster = fleet[0].name
		return
	}
	scfg.ReadOnly = fmt.Sprintf("eventsd mirrors a fleet (%s): each cluster's events are at %sNAME/, read-only; write events to each cluster's kube-apiserver",
		strings.Join(names, ", "), server.ClustersPathPrefix)
}

// runFleet runs every source's mirror until ctx ends, each on its own: a
// source down or refusing stalls only its own. A mirror that refuses its
// source (this eventsd itself) stops, logged, and fails its readiness
// check; the others go on.
func runFleet(ctx context.Context, fms []*fleetMirror, log *slog.Logger) {
	var wg sync.WaitGroup
	for _, fm := range fms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fm.mirror.Run(ctx)
			if errors.Is(err, mirror.ErrRefused) {
				fm.check.setRefused(err)
				log.Error("the mirror of a source refused it and stopped; the other sources go on", "cluster", fm.name, "err", err)
			} else if err != nil {
				log.Error("the mirror stopped", "cluster", fm.name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// stopFleetLineages stops every source's lineage.
func stopFleetLineages(fms []*fleetMirror) {
	for _, fm := range fms {
		fm.lineage.Stop()
	}
}
