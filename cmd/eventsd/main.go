// Command eventsd is a Kubernetes-compatible events API server: it serves
// core/v1 and events.k8s.io/v1 Events over one durable embedded store (or,
// with --storage-backend=etcd, over etcd in kube-apiserver's layout), so
// kubectl, client-go and other Kubernetes clients work against it unchanged.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/kubevents/kubevents/lineage"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubevents/kubevents/access"
	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/demo"
	"github.com/kubevents/kubevents/eventmetrics"
	"github.com/kubevents/kubevents/export"
	"github.com/kubevents/kubevents/export/exportconfig"
	"github.com/kubevents/kubevents/fold"
	"github.com/kubevents/kubevents/internal/buildinfo"
	"github.com/kubevents/kubevents/internal/duration"
	"github.com/kubevents/kubevents/mirror"
	"github.com/kubevents/kubevents/retention"
	"github.com/kubevents/kubevents/server"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	"github.com/kubevents/kubevents/storage/etcdstore"
	"github.com/kubevents/kubevents/storage/pebblestore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// options are eventsd's flags.
type options struct {
	listen            string
	dataDir           string
	eventTTL          time.Duration
	historyWindow     time.Duration
	watchRingBytes    int64
	minFreeDisk       int64
	tlsCertFile       string
	tlsKeyFile        string
	access            access.Options
	authzModes        []string
	shutdownTimeout   time.Duration
	logLevel          string
	profiling         bool
	demo              bool
	maxInflight       int
	maxMutating       int
	extensions        bool
	ui                bool
	lineage           bool
	lineageKubeconfig string
	maxObjectSize     int
	requestTimeout    time.Duration
	bookmarkEvery     time.Duration
	admissionConfig   string
	retentionConfig   string
	foldConfig        string
	eventMetrics      bool
	eventMetricsFile  string
	exportConfig      string
	exportMaxLag      time.Duration
	maxStorageBytes   quantityBytes

	storageBackend     string
	etcdServers        []string
	etcdPrefix         string
	etcdCAFile         string
	etcdCertFile       string
	etcdKeyFile        string
	etcdCompaction     time.Duration
	etcdRequestTimeout time.Duration
	etcdReadycheck     time.Duration
	etcdIndex          string
	etcdIndexDir       string
	leaseReuseDuration int64

	source        sourceOptions
	sourcesConfig string
}

// Storage backends (--storage-backend).
const (
	backendPebble = "pebble"
	backendEtcd   = "etcd"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	o := options{access: access.Options{RequestHeader: access.DefaultRequestHeader()}}
	cmd := &cobra.Command{
		Use:   "eventsd",
		Short: "A Kubernetes-compatible events API server with durable embedded storage",
		Long: `eventsd serves the Kubernetes REST API for core/v1 and events.k8s.io/v1 Events
over one durable embedded store. Point kubectl or any client-go program at it
(for example with --server http://127.0.0.1:8080) and use it as you would the
events of a kube-apiserver.

Besides the API it serves /healthz, /livez, /readyz and /version to everyone,
as kube-apiserver does; /metrics (Prometheus: requests by verb, group and code
with latency, stored events, expirations, storage bytes, open watches, requests
refused for load, group commits); the web timeline at /ui/ (--ui); and Go
profiles at /debug/pprof/ (--profiling).`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := checkDemo(o); err != nil {
				return err
			}
			if err := checkSourcesFlags(o, cmd.Flags().Changed); err != nil {
				return err
			}
			if o.demo && !cmd.Flags().Changed("data-dir") {
				dir, remove, err := demoDataDir()
				if err != nil {
					return fmt.Errorf("--demo: %w", err)
				}
				defer remove()
				o.dataDir = dir
			}
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "Address to serve the API on.")
	f.StringVar(&o.dataDir, "data-dir", "./eventsd-data", "Directory of the embedded store; created if missing.")
	f.DurationVar(&o.eventTTL, "event-ttl", server.DefaultEventTTL, "Amount of time to retain events after their last write.")
	f.StringVar(&o.retentionConfig, "retention-config", "", "File with a RetentionConfiguration (eventsd.kubevents.io/v1alpha1): ordered rules matching events' namespaces, types, reasons and reporting controllers (or source components), each with a TTL; the first rule an event matches gives the TTL of each of its writes, --event-ttl the rest. On etcd the lease follows the rule.")
	f.BoolVar(&o.eventMetrics, "event-metrics", true, "Count event occurrences in eventsd_event_occurrences_total{namespace,type,reason,kind,reporting_controller,name} on /metrics (name by default only on Warning events and the shipped alerts' reasons): every occurrence this eventsd writes (a create of count N adds N, a count or series increase adds the increase; folded and mirrored events included), so that Prometheus rules can alert on events; and the series not yet finished (last observed under 6 minutes ago) in eventsd_event_series_live{reason,kind}. On by default, bounded by --event-metrics-config's maximum of label sets (1000 by default); each replica counts its own writes.")
	f.StringVar(&o.eventMetricsFile, "event-metrics-config", "", "File with an EventMetricsConfiguration (eventsd.kubevents.io/v1alpha1): the labels of eventsd_event_occurrences_total and the events that keep the object's name, the namespaces and reasons that keep their own values (others count as _other), the maximum number of label sets (default 1000; occurrences past it are counted in the _overflow series, never dropped) and how long an idle label set is kept (default 1h).")
	f.StringVar(&o.foldConfig, "fold-config", "", "File with a FoldConfiguration (eventsd.kubevents.io/v1alpha1): ordered rules matching events' namespaces, types, reasons and reporting controllers (or source components), each with a window; a create the first matching rule's window covers, isomorphic to a stored event (as client-go's recorders define it) last observed within that window, is folded into that event (its count and last observed time advanced, its note the latest; watchers see MODIFIED) and answered with it and a Warning header naming it, instead of stored as a new object. Off by default: it changes what a create returns.")
	f.StringVar(&o.exportConfig, "export-config", "", "File with an ExportConfiguration (eventsd.kubevents.io/v1alpha1): sinks (webhook, otlp, file) that get every matching event change, at least once, in revision order, each record with an idempotency key (uid/resourceVersion); each sink's cursor is kept in the store, so restarts resume where the sink left off. On etcd one replica exports at a time.")
	f.DurationVar(&o.exportMaxLag, "export-max-lag", pebblestore.DefaultMaxHistoryHold, "How far back the store keeps changes for the slowest export sink to resume from; a sink further behind loses the changes before (counted in eventsd_export_lost_total and logged).")
	f.Var(&o.maxStorageBytes, "max-storage-bytes", "Budget of the stored events, in bytes (an integer or a Kubernetes quantity such as 10Gi); 0: none. What counts: on pebble each event's key, value (its protobuf), TTL-queue and index entries, not the watch change log or pebble's compaction lag, so leave the disk headroom for those; on etcd the events' keys and values under the prefix. Past it the events closest to their expiry are expired early (watchers get DELETED; counted by retention rule in eventsd_storage_budget_expirations_total) until 90% of it is used, so writes never fail for it.")
	f.DurationVar(&o.historyWindow, "watch-history", pebblestore.DefaultHistoryWindow, "How long changes are kept for watches and paginated lists to resume from.")
	f.Int64Var(&o.watchRingBytes, "watch-ring-bytes", pebblestore.DefaultRingBytes, "Most bytes of recent changes kept decoded in memory for watchers (at most 4096 changes); watchers further behind read the on-disk change log.")
	f.Int64Var(&o.minFreeDisk, "min-free-disk-bytes", pebblestore.DefaultMinFreeBytes, "Free space the data directory's filesystem keeps: below it writes get 507 and /readyz fails, until space is freed. Negative: no check.")
	f.StringVar(&o.tlsCertFile, "tls-cert-file", "", "File with the x509 certificate for HTTPS; serve plain HTTP when empty.")
	f.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "File with the x509 private key matching --tls-cert-file.")
	f.StringVar(&o.access.TokenAuthFile, "token-auth-file", "", "If set, require bearer tokens listed in this file (kube-apiserver CSV format: token,user,uid,\"group1,group2\").")
	f.StringVar(&o.access.TokenWebhookConfigFile, "authentication-token-webhook-config-file", "", "File with webhook configuration for token authentication in kubeconfig format: the server is sent TokenReviews (e.g. a cluster's kube-apiserver, /apis/authentication.k8s.io/v1/tokenreviews).")
	f.StringVar(&o.access.TokenWebhookVersion, "authentication-token-webhook-version", access.DefaultWebhookVersion, "The API version of the authentication.k8s.io TokenReview to send to and expect from the webhook: v1 or v1beta1.")
	f.DurationVar(&o.access.TokenWebhookCacheTTL, "authentication-token-webhook-cache-ttl", access.DefaultTokenWebhookCacheTTL, "The duration to cache responses from the webhook token authenticator; 0 disables the cache.")
	f.StringSliceVar(&o.authzModes, "authorization-mode", []string{access.ModeAlwaysAllow}, "Comma-separated authorization modes, asked in order until one allows or denies: AlwaysAllow, AlwaysDeny, ABAC, Webhook. Anything but AlwaysAllow alone needs --token-auth-file or --authentication-token-webhook-config-file, and lets members of system:masters do everything.")
	f.StringVar(&o.access.PolicyFile, "authorization-policy-file", "", "File with authorization policy in kube-apiserver's ABAC format (one JSON Policy per line), used with --authorization-mode=ABAC.")
	f.StringVar(&o.access.AuthzWebhookConfigFile, "authorization-webhook-config-file", "", "File with webhook configuration in kubeconfig format, used with --authorization-mode=Webhook: the server is sent SubjectAccessReviews (e.g. a cluster's kube-apiserver, /apis/authorization.k8s.io/v1/subjectaccessreviews).")
	f.StringVar(&o.access.AuthzWebhookVersion, "authorization-webhook-version", access.DefaultWebhookVersion, "The API version of the authorization.k8s.io SubjectAccessReview to send to and expect from the webhook: v1 or v1beta1.")
	f.DurationVar(&o.access.AuthorizedTTL, "authorization-webhook-cache-authorized-ttl", access.DefaultAuthorizedTTL, "The duration to cache 'authorized' responses from the webhook authorizer; 0 disables.")
	f.DurationVar(&o.access.UnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", access.DefaultUnauthorizedTTL, "The duration to cache 'unauthorized' responses from the webhook authorizer; 0 disables.")
	// Delegation to a cluster, as kube's aggregated API servers take it
	// (eventsd's group served through the cluster's kube-apiserver).
	f.StringVar(&o.access.AuthenticationKubeconfig, "authentication-kubeconfig", "", "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io (the ClusterRole system:auth-delegator), or \"in-cluster\" for the pod's service account: bearer tokens are checked with TokenReviews, and the front proxy's and client CA's settings not given by flags are looked up in the ConfigMap kube-system/extension-apiserver-authentication (Role extension-apiserver-authentication-reader).")
	f.BoolVar(&o.access.SkipInClusterLookup, "authentication-skip-lookup", false, "If false, the authentication-kubeconfig will be used to lookup missing authentication configuration from the cluster.")
	f.BoolVar(&o.access.TolerateInClusterLookupFailure, "authentication-tolerate-lookup-failure", false, "If true, failures to look up missing authentication configuration from the cluster are not considered fatal: the front proxy's requests are then refused.")
	f.StringVar(&o.access.AuthorizationKubeconfig, "authorization-kubeconfig", "", "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io (the ClusterRole system:auth-delegator), or \"in-cluster\" for the pod's service account: with --authorization-mode=Webhook, instead of --authorization-webhook-config-file.")
	o.access.ClientCert.AddFlags(f)
	o.access.RequestHeader.AddFlags(f)
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "How long to wait for requests in flight on SIGTERM or SIGINT.")
	f.StringVar(&o.logLevel, "log-level", "info", "Log level: debug, info, warn or error.")
	f.IntVar(&o.maxInflight, "max-requests-inflight", server.DefaultMaxRequestsInflight, "Most gets and lists served at once; more get 429 with Retry-After. Negative: no limit.")
	f.IntVar(&o.maxMutating, "max-mutating-requests-inflight", server.DefaultMaxMutatingRequestsInflight, "Most writes served at once; more get 429 with Retry-After. Negative: no limit.")
	f.IntVar(&o.maxObjectSize, "max-object-size-bytes", server.DefaultMaxObjectSizeBytes, "Largest event stored (its protobuf encoding), etcd's default --max-request-bytes; larger writes get 413. Negative: no limit.")
	f.DurationVar(&o.requestTimeout, "request-timeout", server.DefaultRequestTimeout, "How long a request other than a watch may take before it gets 504, as kube-apiserver's flag.")
	f.DurationVar(&o.bookmarkEvery, "watch-bookmark-interval", server.DefaultBookmarkInterval, "How long a watch with allowWatchBookmarks stays idle before it gets a BOOKMARK carrying the revision it has reached.")
	f.StringVar(&o.admissionConfig, "admission-control-config-file", "", "kube-apiserver's AdmissionConfiguration (apiserver.config.k8s.io/v1) with an EventRateLimit entry (eventratelimit.admission.k8s.io/v1alpha1 Configuration, inline or by path): event creates, updates and patches of both API groups beyond its limits get 429 with Retry-After. Other plugins' entries are ignored.")
	f.BoolVar(&o.extensions, "extensions", true, "Accept the field selectors kube-apiserver does not have (action, reportingInstance, related.*, involves.*, family.*) and the filter parameter of lists and watches (CEL); off, they get its 400.")
	f.StringVar(&o.storageBackend, "storage-backend", backendPebble, "Where events are stored: pebble (embedded, under --data-dir) or etcd (--etcd-servers, in kube-apiserver's layout, so a cluster's events etcd can be shared).")
	f.StringSliceVar(&o.etcdServers, "etcd-servers", nil, "etcd servers to connect to (scheme://ip:port), comma separated; with --storage-backend=etcd.")
	f.StringVar(&o.etcdPrefix, "etcd-prefix", etcdstore.DefaultPrefix, "The prefix of events' keys in etcd: <prefix>/events/<namespace>/<name>.")
	f.StringVar(&o.etcdCAFile, "etcd-cafile", "", "SSL Certificate Authority file used to secure etcd communication.")
	f.StringVar(&o.etcdCertFile, "etcd-certfile", "", "SSL certification file used to secure etcd communication.")
	f.StringVar(&o.etcdKeyFile, "etcd-keyfile", "", "SSL key file used to secure etcd communication.")
	f.DurationVar(&o.etcdCompaction, "etcd-compaction-interval", etcdstore.DefaultCompactionInterval, "The interval of compaction requests to etcd; 0 disables compaction by eventsd.")
	f.DurationVar(&o.etcdRequestTimeout, "etcd-request-timeout", etcdstore.DefaultRequestTimeout, "How long one etcd request may take: while etcd is unreachable or without quorum, requests get 503 with Retry-After after at most this long. Keep it below --request-timeout.")
	f.DurationVar(&o.etcdReadycheck, "etcd-readycheck-timeout", etcdstore.DefaultReadycheckTimeout, "The timeout of /readyz's check of etcd, as kube-apiserver's flag.")
	f.StringVar(&o.etcdIndex, "etcd-index", etcdIndexDisk, "Where the etcd backend keeps its secondary index of events (for lists by involved object, reason, ...): disk (a local pebble in --etcd-index-dir, kept across restarts, so a restart resumes it instead of reading every event) or memory (rebuilt from a list of the whole prefix at each start; about 160 bytes of heap per event).")
	f.StringVar(&o.etcdIndexDir, "etcd-index-dir", "", "The directory of the etcd backend's on-disk index (--etcd-index=disk); <--data-dir>/etcd-index when empty. Created if missing; no two eventsd processes may share it.")
	f.Int64Var(&o.leaseReuseDuration, "lease-reuse-duration-seconds", int64(etcdstore.DefaultLeaseReuseDuration/time.Second), "The time in seconds that each etcd lease is reused (capped at 5% of the TTL). A lower value avoids a large number of objects reusing one lease; it must not be too small, or etcd's lease count grows.")
	f.BoolVar(&o.ui, "ui", true, "Serve the web timeline at /ui/ (its files without authentication; the API requests it makes are authenticated and authorized as any other).")
	f.BoolVar(&o.lineage, "lineage", true, "Learn which object owns which (from stored events and, with a source, from the source's object metadata), keep it as long as the events, and answer the family.* field selectors with an object's events and those of everything it owns. Off, family selectors list only the named object's own events.")
	f.StringVar(&o.lineageKubeconfig, "lineage-kubeconfig", "", "The kubeconfig (its current context) of the cluster whose object metadata the lineage follows (metadata-only list and watch of Pods, ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs, CronJobs, Nodes and the kinds events name), or in-cluster; for an eventsd that does not mirror that cluster, such as one beside its kube-apiserver on a shared events etcd. A mirror follows its source's without it.")
	o.source.addFlags(f)
	f.StringVar(&o.sourcesConfig, "sources-config", "", "File with a SourcesConfiguration (eventsd.kubevents.io/v1alpha1): the clusters eventsd mirrors, each named and reached by a kubeconfig (and context) or in-cluster, with its own rate limits and deletions policy. Each cluster is mirrored on its own (cursor, readiness check mirror-NAME, metrics labelled source=NAME) into its own part of the store and served read-only at /clusters/NAME/, every one at once at /clusters/*/; the root serves the only one when there is one. Instead of --source and the other --source-* flags (--source-allow-existing-events applies to every source).")
	f.BoolVar(&o.demo, "demo", false, "Fill the store with a demo: the last half hour of a small cluster's events as of now (a rollout whose new Pod crashloops in namespace shop, an OOM kill, a Pod that cannot be scheduled then fits in namespace batch, a Node that goes NotReady and comes back), and keep its crashloop going while eventsd runs. Without --data-dir the store is a new temporary directory, removed at exit. Not with a mirror or authentication.")
	f.BoolVar(&o.profiling, "profiling", false, "Serve Go profiles at /debug/pprof/ (behind authentication and authorization when set: non-resource get on /debug/pprof/*).")
	duration.HintFlags(f)
	buildinfo.AddVersionFlag(cmd)
	return cmd
}

// loadKeyPair loads the serving certificate and key; its errors name the
// flag and the file at fault.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	for _, f := range []struct{ flag, path string }{{"--tls-cert-file", certFile}, {"--tls-private-key-file", keyFile}} {
		if _, err := os.Stat(f.path); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert-file %s, --tls-private-key-file %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

func run(ctx context.Context, o options) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file must be given together")
	}
	// The key pair is loaded before anything is opened or served, so a
	// bad file is an error naming its flag, not a log line after
	// "serving https".
	var tlsConfig *tls.Config
	if o.tlsCertFile != "" {
		cert, err := loadKeyPair(o.tlsCertFile, o.tlsKeyFile)
		if err != nil {
			return err
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if (o.access.RequestHeader.ClientCAFile != "" || o.access.ClientCert.ClientCA != "") && tlsConfig == nil {
		return errors.New("--requestheader-client-ca-file and --client-ca-file need --tls-cert-file: client certificates come over TLS")
	}
	// Authentication and authorization are built before anything is
	// opened or served, so a bad flag or file is an error naming it.
	ao := o.access
	ao.AuthorizationModes = o.authzModes
	// Flags say 0 to disable a cache; Options say it with a negative TTL.
	for _, d := range []*time.Duration{&ao.TokenWebhookCacheTTL, &ao.AuthorizedTTL, &ao.UnauthorizedTTL} {
		if *d == 0 {
			*d = -1
		}
	}
	var rateLimit *eventratelimit.Limiter
	var rateLimitConfig *eventratelimit.Configuration
	if o.admissionConfig != "" {
		c, ignored, err := eventratelimit.LoadAdmissionConfigFile(o.admissionConfig)
		if err != nil {
			return fmt.Errorf("--admission-control-config-file: %w", err)
		}
		if len(ignored) > 0 {
			log.Info("admission plugin configurations ignored: eventsd has only EventRateLimit", "plugins", ignored)
		}
		if rateLimit, err = eventratelimit.New(c, eventratelimit.Options{}); err != nil {
			return fmt.Errorf("--admission-control-config-file: %w", err)
		}
		rateLimitConfig = c
	}
	var retentionConfig *retention.Configuration
	if o.retentionConfig != "" {
		c, err := retention.LoadFile(o.retentionConfig)
		if err != nil {
			return fmt.Errorf("--retention-config: %w", err)
		}
		retentionConfig = c
	}
	var foldConfig *fold.Configuration
	if o.foldConfig != "" {
		c, err := fold.LoadFile(o.foldConfig)
		if err != nil {
			return fmt.Errorf("--fold-config: %w", err)
		}
		foldConfig = c
	}
	var occurrences *eventmetrics.Counter
	var liveSeries *eventmetrics.LiveSeries
	if o.eventMetrics {
		var c *eventmetrics.Configuration
		var err error
		if o.eventMetricsFile != "" {
			if c, err = eventmetrics.LoadFile(o.eventMetricsFile); err != nil {
				return fmt.Errorf("--event-metrics-config: %w", err)
			}
		}
		if occurrences, err = eventmetrics.New(c, nil); err != nil {
			return fmt.Errorf("--event-metrics-config: %w", err)
		}
		if liveSeries, err = eventmetrics.NewLiveSeries(c, nil); err != nil {
			return fmt.Errorf("--event-metrics-config: %w", err)
		}
	} else if o.eventMetricsFile != "" {
		return errors.New("--event-metrics-config needs --event-metrics")
	}
	var exportConfig *exportconfig.Configuration
	if o.exportConfig != "" {
		c, err := exportconfig.LoadFile(o.exportConfig)
		if err != nil {
			return fmt.Errorf("--export-config: %w", err)
		}
		exportConfig = c
	}
	if o.exportMaxLag <= 0 {
		return fmt.Errorf("--export-max-lag must be positive, not %v", o.exportMaxLag)
	}
	// The storage budget counts its early expirations by the rule that
	// gave each event its TTL, which the server's policy chose at its
	// last write: the same policy names it again, in the cluster the
	// stored event's storage namespace names.
	policy, err := retention.NewPolicy(retentionConfig, o.eventTTL)
	if err != nil {
		return fmt.Errorf("--retention-config: %w", err)
	}
	ruleOf := func(ev *corev1.Event) string {
		_, rule := policy.StoredTTL(ev)
		return rule
	}
	auth, err := access.Build(ao)
	if err != nil {
		return err
	}
	if auth.ClientCertificates {
		if tlsConfig == nil {
			return fmt.Errorf("--authentication-kubeconfig %s: the cluster's front proxy and client certificates need HTTPS: give --tls-cert-file (or --authentication-skip-lookup)", ao.AuthenticationKubeconfig)
		}
		// Asked, not required: the authenticators verify certificates
		// against their own CAs (the front proxy's, the clients'), and
		// clients with a token need none.
		tlsConfig.ClientAuth = tls.RequestClientCert
	}
	for _, n := range auth.Notes {
		log.Info("authentication", "from", n)
	}
	for _, w := range auth.Warnings {
		log.Warn("authentication", "problem", w)
	}
	// The CA files and what was looked up in the cluster are followed
	// while eventsd runs.
	authCtx, stopAuth := context.WithCancel(context.Background())
	authDone := make(chan struct{})
	go func() {
		defer close(authDone)
		auth.Run(authCtx)
	}()
	defer func() {
		stopAuth()
		<-authDone
	}()
	// The source's flags and kubeconfig are checked before the store is
	// opened or created: a bad one is one error line, nothing on disk.
	var src *source
	if o.source.enabled() {
		if src, err = o.source.build(); err != nil {
			return err
		}
	}
	var fleet []*fleetSource
	if o.sourcesConfig != "" {
		if o.source.enabled() {
			return errors.New("--sources-config lists the sources: give it or --source/--source-kubeconfig, not both")
		}
		if fleet, err = buildFleet(o.sourcesConfig, o.source.allowExisting); err != nil {
			return err
		}
	}
	lineageCfg, err := lineageCluster(o, src)
	if err != nil {
		return err
	}
	instanceID, err := newInstanceID()
	if err != nil {
		return err
	}
	// The address is taken before the store is opened or created: a
	// port in use changes nothing on disk.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	// A start that fails once its store is open (a sink that cannot be
	// built) leaves no data directory it created behind; one that existed
	// is kept, whatever it holds. The store removes it once closed, before
	// it releases the directory's lock, so that nothing of the store
	// writes into it as it goes and another eventsd cannot have opened it;
	// a store that failed to open (locked by another eventsd) removes
	// nothing.
	var created string
	if o.storageBackend == backendPebble {
		if created, err = missingDir(o.dataDir); err != nil {
			ln.Close()
			return fmt.Errorf("--data-dir: %w", err)
		}
	}
	var store storage.Interface
	// The lineage learns from the store once it is open: a failed start
	// stops it before the store closes under it.
	var lin *runningLineage
	// A fleet's mirrors, each with its lineage.
	var fms []*fleetMirror
	failStart := func(err error) error {
		ln.Close()
		lin.Stop()
		stopFleetLineages(fms)
		if store == nil {
			return err
		}
		if ps, ok := store.(*pebblestore.Store); ok && created != "" {
			if rerr := ps.CloseAndRemove(created); rerr != nil {
				log.Error("removing the data directory this failed start created", "dir", created, "err", rerr)
			}
			return err
		}
		store.Close()
		return err
	}
	reg := prometheus.NewRegistry()
	// Assigned only once open: a failed open returns a nil *Store in a
	// non-nil interface, which failStart must not close.
	var written storage.WriteObserver
	if occurrences != nil {
		if err := reg.Register(occurrences); err != nil {
			return failStart(fmt.Errorf("event metrics: %w", err))
		}
		if err := reg.Register(liveSeries); err != nil {
			return failStart(fmt.Errorf("event metrics: %w", err))
		}
		written = func(prev, cur *corev1.Event) {
			occurrences.Observe(prev, cur)
			liveSeries.Observe(prev, cur)
		}
	}
	st, err := openStore(o, log, reg, ruleOf, written)
	if err != nil {
		return failStart(err)
	}
	store = st
	scfg := server.Config{Store: store, Registry: reg, EventTTL: o.eventTTL, Logger: log, Authenticator: auth.Authenticator, FrontProxy: auth.FrontProxy, Authorizer: auth.Authorizer, Profiling: o.profiling,
		MaxRequestsInflight: o.maxInflight, MaxMutatingRequestsInflight: o.maxMutating, DisableExtensions: !o.extensions, UI: o.ui,
		MaxObjectSizeBytes: o.maxObjectSize, RequestTimeout: o.requestTimeout, BookmarkInterval: o.bookmarkEvery,
		EventRateLimit: rateLimit, Retention: retentionConfig, Fold: foldConfig, InstanceID: instanceID}
	// The mirror, if any, writes into the store; the API then only reads
	// (a local write would be a second source of truth beside the
	// cluster's, which the mirror could overwrite or the API contradict).
	var mir *mirror.Mirror
	// The mirror's writes are counted by retention rule as the API's
	// are, by the server made below (before the mirror runs).
	var srv *server.Server
	if src != nil {
		stored := func(ev *corev1.Event) { srv.CountRetentionWrite(ev) }
		ttl := func(ev *corev1.Event) time.Duration { ttl, _ := policy.TTL(ev); return ttl }
		if mir, err = newMirror(src, o.source.settings(), store, ttl, stored, reg, log, instanceID); err != nil {
			return failStart(err)
		}
		if err := mir.CheckStore(ctx); err != nil {
			var ee *mirror.ExistingEventsError
			if errors.As(err, &ee) {
				return failStart(fmt.Errorf("%s: %w; use another %s, or give --%s to mirror into it anyway", o.storeName(), err, o.storeFlag(), allowExistingFlag))
			}
			return failStart(err)
		}
		log.Info("mirroring a cluster's events", "source", src.name, "server", src.cfg.Host, "deletions", o.source.deletions, "initialSync", o.source.initialSync)
		scfg.ReadOnly = readOnlyMessage(src)
		scfg.ReadyChecks = append(scfg.ReadyChecks, mir)
	}
	if fleet != nil {
		// A source's writes take the TTL of the rules in force in its
		// cluster, and are counted by the rule that chose it (the events
		// as its cluster's view has them: real namespaces).
		ttl := func(cluster string, ev *corev1.Event) time.Duration {
			ttl, _ := policy.ClusterTTL(cluster, ev)
			return ttl
		}
		stored := func(cluster string, ev *corev1.Event) { srv.CountClusterRetentionWrite(cluster, ev) }
		if fms, err = startFleet(ctx, fleet, o, store, ttl, stored, reg, log, instanceID); err != nil {
			return failStart(err)
		}
		serveFleet(&scfg, fleet, fms)
	}
	switch {
	case o.lineage && len(fleet) == 1:
		// The root serves the fleet's only cluster, with its lineage.
	case o.lineage:
		// The root cluster's own events: a fleet's are in their clusters.
		// Its metrics are the sources' (labelled source=NAME).
		rootStore, rootReg := store, prometheus.Registerer(reg)
		if fleet != nil {
			rootStore, rootReg = clusterview.New(store, ""), nil
		}
		if lin, err = startLineage(ctx, rootStore, lineageCfg, rootReg, log); err != nil {
			return failStart(err)
		}
		scfg.Lineage = lin.graph
	default:
		off := lineage.New(lineage.Options{})
		off.SetLearning("ownership is not learned: eventsd runs with --lineage=false")
		scfg.Lineage = off
	}
	srv, err = server.New(scfg)
	if err != nil {
		return failStart(err)
	}
	// The exporter runs until the server has stopped taking writes, and
	// stops before the store closes.
	var exp *export.Exporter
	if exportConfig != nil {
		if exp, err = newExporter(exportConfig, store, reg, log); err != nil {
			return failStart(fmt.Errorf("--export-config: %w", err))
		}
	}
	exportCtx, stopExport := context.WithCancel(context.Background())
	defer stopExport()
	exportDone := make(chan struct{})
	go func() {
		defer close(exportDone)
		if exp != nil {
			_ = exp.Run(exportCtx)
		}
	}()
	// The mirror too runs until the server has stopped, and stops (saving
	// its cursor) before the store closes.
	mirrorCtx, stopMirror := context.WithCancel(context.Background())
	defer stopMirror()
	mirrorDone := make(chan struct{})
	// A source the mirror refuses (this eventsd itself) ends eventsd.
	mirrorRefused := make(chan error, 1)
	go func() {
		defer close(mirrorDone)
		if mir != nil {
			if err := mir.Run(mirrorCtx); errors.Is(err, mirror.ErrRefused) {
				mirrorRefused <- err
			} else if err != nil {
				log.Error("the mirror stopped", "err", err)
			}
		}
		runFleet(mirrorCtx, fms, log)
	}()
	// The count for the log line, before serving: Stats may wait (up to a
	// second on etcd) for the store's index, and nothing that readiness
	// lets a client do should race it.
	storedEvents := store.Stats().Events
	hs := srv.NewHTTPServer()
	hs.TLSConfig = tlsConfig
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- hs.ServeTLS(ln, "", "")
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	scheme := "http"
	if o.tlsCertFile != "" {
		scheme = "https"
	}
	logPolicies(log, retentionConfig, policy, o.eventTTL, rateLimitConfig)
	logFoldRules(log, foldConfig)
	log.Info("eventsd serving", "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String(), "version", buildinfo.Get().GitVersion,
		"storageBackend", o.storageBackend, "dataDir", o.dataDir, "eventTTL", o.eventTTL, "revision", store.Revision(), "events", storedEvents,
		"auth", auth.Authenticator != nil || auth.FrontProxy != nil, "frontProxy", auth.FrontProxy != nil, "authorizationModes", strings.Join(auth.Modes, ","))

	stopDemo := func() {}
	if o.demo {
		stopDemo = startDemo(srv, log)
		log.Info("demo: try it", "web", scheme+"://"+ln.Addr().String()+"/ui/",
			"kubectl", "kubectl --server "+scheme+"://"+ln.Addr().String()+" get events -n "+demo.Namespace,
			"evctl", "evctl --server "+scheme+"://"+ln.Addr().String()+" timeline pod/"+demo.CrashingPod+" -n "+demo.Namespace)
	}

	select {
	case err = <-errc:
		log.Error("server failed", "err", err)
	case err = <-mirrorRefused:
	case <-ctx.Done():
		log.Info("shutting down: finishing requests in flight")
	}
	stopDemo()
	srv.BeginShutdown()
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		log.Warn("requests still in flight at the shutdown deadline", "err", serr)
	}
	// Requests answered 504 may still be running their handlers.
	if derr := srv.Drain(sctx); derr != nil {
		log.Warn("handlers of timed-out requests still running at the shutdown deadline", "err", derr)
	}
	stopExport()
	stopMirror()
	<-exportDone
	<-mirrorDone
	lin.Stop()
	stopFleetLineages(fms)
	if errors.Is(err, mirror.ErrRefused) {
		// The mirror refused its source before reading anything, and the
		// API took no writes (read-only): the start failed, and leaves no
		// data directory it created, as any failed start.
		return failStart(err)
	}
	if cerr := store.Close(); cerr != nil {
		log.Error("closing the store", "err", cerr)
		return cerr
	}
	log.Info("stopped", "revision", store.Revision())
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// newInstanceID is this process's random identity, sent with every
// response (server.Config.InstanceID), by which its mirror recognises
// itself as a source.
func newInstanceID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("the instance id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// storeName says where the store is, for errors about what it holds.
func (o options) storeName() string {
	if o.storageBackend == backendEtcd {
		return fmt.Sprintf("the store (--etcd-servers %s, --etcd-prefix %s)", strings.Join(o.etcdServers, ","), o.etcdPrefix)
	}
	return "--data-dir " + o.dataDir
}

// storeFlag is the flag that chooses another store.
func (o options) storeFlag() string {
	if o.storageBackend == backendEtcd {
		return "--etcd-prefix"
	}
	return "--data-dir"
}

// missingDir returns the outermost directory of path (path itself or one
// of its parents) that does not exist yet, which opening a store there
// would create; "" when path exists.
func missingDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	missing := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(dir); err == nil {
			return missing, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		missing = dir
		if filepath.Dir(dir) == dir {
			return missing, nil
		}
	}
}

// logPolicies logs the retention rules and event rate limits in force,
// as newExporter logs the export sinks: what a start-up took from its
// configuration files.
func logPolicies(log *slog.Logger, rc *retention.Configuration, policy *retention.Policy, eventTTL time.Duration, limits *eventratelimit.Configuration) {
	if rc != nil {
		names := policy.RuleNames()
		for i, r := range rc.Rules {
			attrs := []any{"rule", names[i], "ttl", r.TTL}
			if len(r.Clusters) > 0 {
				cs := make([]string, len(r.Clusters))
				for j, c := range r.Clusters {
					cs[j] = cmp.Or(c, `""`) // the root cluster
				}
				attrs = append(attrs, "clusters", strings.Join(cs, ","))
			}
			for _, c := range []struct {
				key    string
				values []string
			}{{"namespaces", r.Namespaces}, {"types", r.Types}, {"reasons", r.Reasons}, {"reportingControllers", r.ReportingControllers}} {
				if len(c.values) > 0 {
					attrs = append(attrs, c.key, strings.Join(c.values, ","))
				}
			}
			log.Info("retention rule", attrs...)
		}
		log.Info("retention rule", "rule", retention.DefaultRuleName, "ttl", eventTTL, "matches", "events no rule above matches (--event-ttl)")
	}
	if limits != nil {
		for _, l := range limits.Limits {
			attrs := []any{"type", l.Type, "qps", l.QPS, "burst", l.Burst}
			if l.Type != eventratelimit.ServerLimitType {
				size := l.CacheSize
				if size == 0 {
					size = eventratelimit.DefaultCacheSize
				}
				attrs = append(attrs, "cacheSize", size)
			}
			log.Info("event rate limit", attrs...)
		}
	}
}

// logFoldRules logs the fold rules in force, in order, as logPolicies
// logs the retention rules.
func logFoldRules(log *slog.Logger, c *fold.Configuration) {
	if c == nil {
		return
	}
	if len(c.Rules) == 0 {
		log.Warn("the fold configuration has no rules: no create is folded")
		return
	}
	for i, r := range c.Rules {
		attrs := []any{"rule", fold.RuleName(r.Name, i), "window", r.Window}
		for _, f := range []struct {
			key    string
			values []string
		}{{"namespaces", r.Namespaces}, {"types", r.Types}, {"reasons", r.Reasons}, {"reportingControllers", r.ReportingControllers}} {
			if len(f.values) > 0 {
				attrs = append(attrs, f.key, strings.Join(f.values, ","))
			}
		}
		log.Info("fold rule", attrs...)
	}
}

// newExporter builds the configured sinks and an exporter over store.
func newExporter(c *exportconfig.Configuration, store storage.Interface, reg prometheus.Registerer, log *slog.Logger) (*export.Exporter, error) {
	es, ok := store.(export.Store)
	if !ok {
		return nil, errors.New("the storage backend cannot keep export cursors")
	}
	specs, err := c.Build(exportconfig.BuildOptions{Version: buildinfo.Get().GitVersion})
	if err != nil {
		return nil, err
	}
	exp, err := export.New(export.Options{Store: es, Sinks: specs, Registerer: reg, Logger: log})
	if err != nil {
		for _, s := range specs {
			s.Sink.Close()
		}
		return nil, err
	}
	for _, s := range specs {
		log.Info("exporting events", "sink", s.Name, "type", s.Type)
	}
	return exp, nil
}

// Values of --etcd-index.
const (
	etcdIndexDisk   = "disk"
	etcdIndexMemory = "memory"
)

// etcdIndexDirectory is the on-disk index's directory per --etcd-index
// and --etcd-index-dir, or "" for the in-memory index.
func (o options) etcdIndexDirectory() (string, error) {
	switch o.etcdIndex {
	case etcdIndexMemory:
		return "", nil
	case etcdIndexDisk:
		if o.etcdIndexDir != "" {
			return o.etcdIndexDir, nil
		}
		return filepath.Join(o.dataDir, "etcd-index"), nil
	}
	return "", fmt.Errorf("--etcd-index: %q is neither %s nor %s", o.etcdIndex, etcdIndexDisk, etcdIndexMemory)
}

// openStore opens the backend --storage-backend names.
func openStore(o options, log *slog.Logger, reg prometheus.Registerer, ruleOf func(*corev1.Event) string, written storage.WriteObserver) (storage.Interface, error) {
	switch o.storageBackend {
	case backendPebble:
		return pebblestore.Open(pebblestore.Options{Dir: o.dataDir, DefaultTTL: o.eventTTL, HistoryWindow: o.historyWindow,
			RingBytes: o.watchRingBytes, MinFreeBytes: o.minFreeDisk, MaxHistoryHold: o.exportMaxLag, Logger: log,
			MaxBytes: int64(o.maxStorageBytes), RuleOf: ruleOf, Registerer: reg, Written: written})
	case backendEtcd:
		if len(o.etcdServers) == 0 {
			return nil, errors.New("--storage-backend=etcd needs --etcd-servers")
		}
		if o.etcdRequestTimeout <= 0 || o.etcdReadycheck <= 0 {
			return nil, errors.New("--etcd-request-timeout and --etcd-readycheck-timeout must be positive")
		}
		if o.leaseReuseDuration <= 0 {
			return nil, fmt.Errorf("--lease-reuse-duration-seconds must be positive, not %d", o.leaseReuseDuration)
		}
		indexDir, err := o.etcdIndexDirectory()
		if err != nil {
			return nil, err
		}
		opts := etcdstore.Options{
			Endpoints:          o.etcdServers,
			Prefix:             o.etcdPrefix,
			DefaultTTL:         o.eventTTL,
			LeaseReuseDuration: time.Duration(o.leaseReuseDuration) * time.Second,
			CompactionInterval: o.etcdCompaction,
			RequestTimeout:     o.etcdRequestTimeout,
			ReadycheckTimeout:  o.etcdReadycheck,
			MaxHistoryHold:     o.exportMaxLag,
			Logger:             log,
			Registerer:         reg,
			MaxBytes:           int64(o.maxStorageBytes),
			RuleOf:             ruleOf,
			IndexDir:           indexDir,
			Written:            written,
		}
		if o.etcdCompaction <= 0 {
			opts.CompactionInterval = -1 // off, as kube-apiserver's 0
		}
		if o.etcdCAFile != "" || o.etcdCertFile != "" || o.etcdKeyFile != "" {
			if (o.etcdCertFile == "") != (o.etcdKeyFile == "") {
				return nil, errors.New("--etcd-certfile and --etcd-keyfile must be given together")
			}
			info := transport.TLSInfo{CertFile: o.etcdCertFile, KeyFile: o.etcdKeyFile, TrustedCAFile: o.etcdCAFile}
			tlsConfig, err := info.ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("etcd TLS: %w", err)
			}
			opts.TLS = tlsConfig
		}
		return etcdstore.Open(opts)
	}
	return nil, fmt.Errorf("--storage-backend: %q is neither %s nor %s", o.storageBackend, backendPebble, backendEtcd)
}

// quantityBytes is a flag of bytes given as an integer or a Kubernetes
// quantity (10Gi, 500M), as resource.ParseQuantity reads them.
type quantityBytes int64

// String implements pflag.Value.
func (q *quantityBytes) String() string { return strconv.FormatInt(int64(*q), 10) }

// Set implements pflag.Value: a negative, fractional or out-of-range
// number of bytes is an error.
func (q *quantityBytes) Set(v string) error {
	qty, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Errorf("%q is neither a number of bytes nor a quantity such as 10Gi: %w", v, err)
	}
	n, ok := qty.AsInt64()
	if !ok || n < 0 {
		return fmt.Errorf("%q is not a whole, non-negative number of bytes", v)
	}
	*q = quantityBytes(n)
	return nil
}

// Type implements pflag.Value.
func (q *quantityBytes) Type() string { return "quantity" }
