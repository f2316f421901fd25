package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/retention"
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
}

// Defaults of the source client's rate limits: the mirror makes one
// watch and, at start or after a 410, a list of 500-event pages (a
// 100,000-event cluster in 200 requests), so a modest share of the
// source's priority level is enough.
const (
	defaultSourceQPS   = 20
	defaultSourceBurst = 40
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
}

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
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: s.kubeconfig}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("--source-kubeconfig %s: %w", s.kubeconfig, err)
	}
	ctxName := raw.CurrentContext
	if s.context != "" {
		ctxName = s.context
	}
	if _, ok := raw.Contexts[ctxName]; !ok {
		return nil, "", fmt.Errorf("--source-kubeconfig %s has no context %q", s.kubeconfig, ctxName)
	}
	c, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("--source-kubeconfig %s, context %q: %w", s.kubeconfig, ctxName, err)
	}
	return c, s.name(ctxName), nil
}

// newMirror builds the mirror of the configured source into store, its
// writes given their TTL by policy (eventsd's --event-ttl and retention
// rules, not the source's).
func newMirror(s sourceOptions, store storage.Interface, policy *retention.Policy, reg prometheus.Registerer, log *slog.Logger) (*mirror.Mirror, string, error) {
	ms, ok := store.(mirror.Store)
	if !ok {
		return nil, "", errors.New("the storage backend cannot keep the mirror's cursor")
	}
	if s.qps <= 0 || s.burst <= 0 {
		return nil, "", errors.New("--source-qps and --source-burst must be positive")
	}
	if s.eventTTL <= 0 {
		return nil, "", errors.New("--source-event-ttl must be positive")
	}
	cfg, name, err := s.restConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.QPS, cfg.Burst = s.qps, s.burst
	cfg.UserAgent = "eventsd-mirror/" + buildinfo.Get().GitVersion
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("the source's client: %w", err)
	}
	m, err := mirror.New(mirror.Options{
		Source:      cs.CoreV1().Events(""),
		Store:       ms,
		SourceName:  name,
		TTL:         func(ev *corev1.Event) time.Duration { ttl, _ := policy.TTL(ev); return ttl },
		Deletions:   mirror.DeletionPolicy(s.deletions),
		InitialSync: mirror.InitialSync(s.initialSync),
		SourceTTL:   s.eventTTL,
		Registerer:  reg,
		Logger:      log,
	})
	if err != nil {
		return nil, "", fmt.Errorf("--source-*: %w", err)
	}
	log.Info("mirroring a cluster's events", "source", name, "server", cfg.Host, "deletions", s.deletions, "initialSync", s.initialSync)
	return m, name, nil
}
