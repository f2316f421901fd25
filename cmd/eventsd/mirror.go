package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/mirror/sourcesconfig"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
)

// sourceInCluster is --source's one value: the cluster eventsd runs in,
// through its pod's service account.
const sourceInCluster = "in-cluster"

// sourceOptions are the flags of the cluster eventsd mirrors.
type sourceOptions struct {
	source      string
	kubeconfig  string
	context     string
	qps         float32
	burst       int
	deletions   string
	eventTTL    time.Duration
	initialSync string
	// allowExisting: mirror into a store holding events no mirror of
	// this source wrote.
	allowExisting bool
}

// Defaults of the source client's rate limits, a fleet's sources' too.
const (
	defaultSourceQPS   = sourcesconfig.DefaultQPS
	defaultSourceBurst = sourcesconfig.DefaultBurst
)

func (s *sourceOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.source, "source", "", "Mirror the events of the cluster eventsd runs in: \"in-cluster\" (its pod's service account). See --source-kubeconfig for another cluster.")
	f.StringVar(&s.kubeconfig, "source-kubeconfig", "", "Mirror the events of the cluster this kubeconfig file points at (its current context, or --source-context): eventsd lists and watches its core/v1 Events (needs get, list and watch on events) and keeps them in its own store; its API is then read-only.")
	f.StringVar(&s.context, "source-context", "", "The context of --source-kubeconfig to use; its current context when empty.")
	f.Float32Var(&s.qps, "source-qps", defaultSourceQPS, "Requests per second the mirror may send to the source's kube-apiserver (client-go's QPS).")
	f.IntVar(&s.burst, "source-burst", defaultSourceBurst, "Requests the mirror may send to the source at once above --source-qps (client-go's burst).")
	f.StringVar(&s.deletions, "source-deletions", string(mirror.DeletionsKeep), "What a deletion in the source does: keep (the event stays until eventsd's --event-ttl or retention rules expire it: the source's TTL does not shorten eventsd's history) or propagate (it is deleted here too).")
	f.DurationVar(&s.eventTTL, "source-event-ttl", mirror.DefaultSourceTTL, "The source's --event-ttl: after a restart or a 410, how long the mirror was away beyond it is reported as a gap (events created and expired in the source meanwhile cannot be mirrored).")
	f.StringVar(&s.initialSync, "source-initial-sync", string(mirror.InitialSyncAuto), "How the source's events are read at start and after a 410: auto (a WatchList stream, or paginated lists where the source refuses it), watchlist or list.")
	f.BoolVar(&s.allowExisting, allowExistingFlag, false, "Mirror into a store that holds events no mirror of this source wrote (eventsd's own, from before it mirrored, or another source's mirror, whose cursor is then dropped), mixing them with the source's; without it such a start is refused. With --sources-config, for every source, each in its own cluster's part of the store.")
}

// allowExistingFlag is the flag that lets a mirror start on a store
// holding other events.
const allowExistingFlag = "source-allow-existing-events"

// enabled reports whether a source is configured.
func (s *sourceOptions) enabled() bool { return s.source != "" || s.kubeconfig != "" }

// name is how logs and the read-only API's answers name the source.
func (s *sourceOptions) name(contextName string) string {
	if s.source == sourceInCluster {
		return "in-cluster"
	}
	return fmt.Sprintf("context %q of %s", contextName, s.kubeconfig)
}

// restConfig builds the source's client configuration from the flags.
func (s *sourceOptions) restConfig() (*rest.Config, string, error) {
	switch {
	case s.source != "" && s.kubeconfig != "":
		return nil, "", errors.New("--source and --source-kubeconfig are alternatives: give one")
	case s.source != "" && s.source != sourceInCluster:
		return nil, "", fmt.Errorf("--source: %q is not %q (use --source-kubeconfig for another cluster)", s.source, sourceInCluster)
	case s.source == sourceInCluster:
		if s.context != "" {
			return nil, "", errors.New("--source-context goes with --source-kubeconfig")
		}
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("--source=in-cluster: %w", err)
		}
		return c, s.name(""), nil
	}
	c, ctxName, err := loadKubeconfig(s.kubeconfig, s.context, "--source-kubeconfig", "--source-context")
	if err != nil {
		return nil, "", err
	}
	return c, s.name(ctxName), nil
}

// loadKubeconfig reads the client configuration of the kubeconfig at
// path, its context named context (its current context when empty), and
// returns it with the context's name; errors name the kubeconfig as
// pathField and the context as contextField (a flag, or a field of
// --sources-config).
func loadKubeconfig(path, context, pathField, contextField string) (*rest.Config, string, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", pathField, path, err)
	}
	ctxName := raw.CurrentContext
	if context != "" {
		ctxName = context
	}
	if ctxName == "" {
		return nil, "", fmt.Errorf("%s %s has no current context: name one with %s", pathField, path, contextField)
	}
	if _, ok := raw.Contexts[ctxName]; !ok {
		return nil, "", fmt.Errorf("%s %s has no context %q", pathField, path, ctxName)
	}
	c, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("%s %s, context %q: %w", pathField, path, ctxName, err)
	}
	return c, ctxName, nil
}

// source is the configured source's client, built (and its flags
// checked) before the store is opened: a bad kubeconfig is one error
// line, with nothing created on disk.
type source struct {
	cfg    *rest.Config
	name   string
	events corev1client.EventInterface
	// http is a client with the source's credentials, for CheckSource.
	http *http.Client
}

// build checks the source's flags and builds its client.
func (s *sourceOptions) build() (*source, error) {
	if s.qps <= 0 || s.burst <= 0 {
		return nil, errors.New("--source-qps and --source-burst must be positive")
	}
	if s.eventTTL <= 0 {
		return nil, errors.New("--source-event-ttl must be positive")
	}
	switch mirror.DeletionPolicy(s.deletions) {
	case mirror.DeletionsKeep, mirror.DeletionsPropagate:
	default:
		return nil, fmt.Errorf("--source-deletions: %q is neither %s nor %s", s.deletions, mirror.DeletionsKeep, mirror.DeletionsPropagate)
	}
	switch mirror.InitialSync(s.initialSync) {
	case mirror.InitialSyncAuto, mirror.InitialSyncWatchList, mirror.InitialSyncList:
	default:
		return nil, fmt.Errorf("--source-initial-sync: %q is not %s, %s or %s", s.initialSync, mirror.InitialSyncAuto, mirror.InitialSyncWatchList, mirror.InitialSyncList)
	}
	cfg, name, err := s.restConfig()
	if err != nil {
		return nil, err
	}
	return newSource(cfg, name, s.qps, s.burst)
}

// newSource builds the client of the source cfg reaches, named name, with
// its rate limits.
func newSource(cfg *rest.Config, name string, qps float32, burst int) (*source, error) {
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "eventsd-mirror/" + buildinfo.Get().GitVersion
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the source's client (%s): %w", name, err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the source's client (%s): %w", name, err)
	}
	return &source{cfg: cfg, name: name, events: cs.CoreV1().Events(""), http: hc}, nil
}

// notSelf is the mirror's CheckSource: it asks the source for one event,
// as the mirror reads them, and refuses it when the answer (whatever its
// status: a refusal of authentication too) carries this process's
// instance id (server.InstanceHeader): the source is this eventsd, as when
// a kubeconfig's current context is eventsd itself, and mirroring it
// would read its own events back (and hang its readiness on itself).
// A source answering with another eventsd's id is followed: an eventsd
// that serves its own writes (a test bed, an edge eventsd recorders write
// to) is a legitimate source, and one that mirrors a cluster is one too (a
// longer-lived copy of a copy); only a ring of mirrors, which takes two
// mistakes, would go round.
func (src *source) notSelf(instanceID string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		u, _, err := rest.DefaultServerUrlFor(src.cfg)
		if err != nil {
			return err
		}
		u = u.JoinPath("api", "v1", "events")
		u.RawQuery = "limit=1"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		resp, err := src.http.Do(req)
		if err != nil {
			return fmt.Errorf("asking the source who it is: %w", err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.Header.Get(server.InstanceHeader) == instanceID {
			return fmt.Errorf("%w: the source, %s (%s), is this eventsd itself: it answered with this process's instance id. "+
				"Mirroring it would read its own events back. Point --source-kubeconfig (or --source-context) at the cluster's kube-apiserver, "+
				"not at eventsd", mirror.ErrRefused, src.name, src.cfg.Host)
		}
		return nil
	}
}

// mirrorSettings are how a source is mirrored: the single source's
// --source-* flags, or a fleet's source's fields.
type mirrorSettings struct {
	deletions     mirror.DeletionPolicy
	initialSync   mirror.InitialSync
	eventTTL      time.Duration
	allowExisting bool
	// what names the source's settings in errors.
	what string
}

// settings are the single source's mirror settings.
func (s *sourceOptions) settings() mirrorSettings {
	return mirrorSettings{deletions: mirror.DeletionPolicy(s.deletions), initialSync: mirror.InitialSync(s.initialSync),
		eventTTL: s.eventTTL, allowExisting: s.allowExisting, what: "--source-*"}
}

// newMirror builds the mirror of src into store, its writes given their
// TTL by ttl (eventsd's --event-ttl and retention rules, not the
// source's) and each stored write told to stored, refusing the source if
// it is this process (instanceID).
func newMirror(src *source, s mirrorSettings, store storage.Interface, ttl func(*corev1.Event) time.Duration, stored func(*corev1.Event), reg prometheus.Registerer, log *slog.Logger, instanceID string) (*mirror.Mirror, error) {
	ms, ok := store.(mirror.Store)
	if !ok {
		return nil, errors.New("the storage backend cannot keep the mirror's cursor")
	}
	m, err := mirror.New(mirror.Options{
		Source:              src.events,
		Store:               ms,
		SourceName:          src.name,
		SourceID:            src.cfg.Host,
		AllowExistingEvents: s.allowExisting,
		CheckSource:         src.notSelf(instanceID),
		TTL:                 ttl,
		Stored:              stored,
		Deletions:           s.deletions,
		InitialSync:         s.initialSync,
		SourceTTL:           s.eventTTL,
		Registerer:          reg,
		Logger:              log,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.what, err)
	}
	return m, nil
}
