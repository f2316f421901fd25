package evctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// defaultRequestTimeout is --request-timeout's default: "0", no timeout,
// as kubectl's.
const defaultRequestTimeout = "0"

// connFlags are kubectl's connection flags.
type connFlags struct {
	kubeconfig, context, namespace, server, token string
	// caFile is --certificate-authority.
	caFile        string
	insecure      bool
	allNamespaces bool
	// apiGroup is --api-group.
	apiGroup string
	// cluster is --cluster: one cluster of an eventsd serving a fleet;
	// allClusters is --all-clusters: every cluster of it at once.
	cluster     string
	allClusters bool
	// timeout is --request-timeout as given: kubectl's syntax (a duration
	// with its unit, or whole seconds), parsed by clientcmd.
	timeout string
	// warnings, if set, receives the server's Warning headers as kubectl
	// prints them ("Warning: ..."), each once.
	warnings io.Writer
}

func (c *connFlags) add(f *pflag.FlagSet) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
	f.StringVar(&c.context, "context", "", "The kubeconfig context to use.")
	f.StringVarP(&c.namespace, "namespace", "n", "", "The namespace (default: the context's, else default).")
	f.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "Look in every namespace.")
	f.StringVar(&c.server, "server", "", "The API server's URL, instead of the kubeconfig's.")
	f.StringVar(&c.token, "token", "", "A bearer token for the API server.")
	f.StringVar(&c.caFile, "certificate-authority", "", "A file with the CA certificates (PEM) to verify the server's certificate with, instead of the kubeconfig's.")
	f.BoolVar(&c.insecure, "insecure-skip-tls-verify", false, "Do not verify the server's certificate.")
	f.StringVar(&c.apiGroup, "api-group", groupAuto, "The API group to read events from: events.k8s.io, events.kubevents.io (eventsd's own, the one a cluster's kube-apiserver serves when eventsd is registered as an APIService), or auto: events.kubevents.io when the server is a kube-apiserver that serves it, else events.k8s.io.")
	f.StringVar(&c.cluster, "cluster", "", "Read the events of this cluster of an eventsd serving a fleet: the server's URL + /clusters/NAME (see evctl clusters).")
	f.BoolVar(&c.allClusters, "all-clusters", false, "Read the events of every cluster of an eventsd serving a fleet at once (the server's URL + /clusters/*): read-only, each event with its cluster (a CLUSTER column).")
	f.StringVar(&c.timeout, "request-timeout", defaultRequestTimeout,
		"How long to wait for the answer to each request before giving up (e.g. 1s, 2m; a bare number is seconds; 0 waits forever). "+
			"A watch is bounded only until the server starts streaming: once live, it is never cut.")
}

// clients are the clientsets of one evctl run.
type clients struct {
	// cs makes every request but watches; each is bounded by timeout.
	cs kubernetes.Interface
	// watch makes the watches: no overall timeout (a live watch runs
	// for as long as the user wants); the querier bounds only their
	// start by timeout.
	watch kubernetes.Interface
	// events and watchEvents read the events of --api-group, with cs's
	// and watch's configurations.
	events, watchEvents eventsIn
	// lineages lists eventsd's lineages (events.kubevents.io/v1), with
	// cs's configuration.
	lineages lineagesIn
	// search lists a page of the events of --api-group with eventsd's
	// filter and time range, with cs's configuration.
	search searchIn
	// searchWatch watches them with eventsd's filter, with watch's
	// configuration.
	searchWatch searchWatchIn
	// facets summarizes eventsd's events (events.kubevents.io/v1), with
	// cs's configuration.
	facets facetsIn
	// group is the API group events are read from.
	group string
	// timeout is --request-timeout, parsed; 0 means none.
	timeout time.Duration
	// ns is the namespace of -n, else of the context, else default.
	ns string
	// cluster is the fleet's cluster the clients read: "" for the
	// server's root, fleetCluster for every cluster at once.
	cluster string
	// clusters lists the fleet's clusters (GET /clusters/ of the
	// server, whatever --cluster says).
	clusters clustersIn
	// conn are the flags the clients were built from, for the clients
	// of another cluster (an MCP tool call's cluster argument).
	conn connFlags
}

// client builds the clientsets and the namespace to use, as kubectl does:
// the kubeconfig (with its loading rules), overridden by the flags.
func (c *connFlags) client() (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context, Timeout: c.timeout}
	if c.server != "" {
		overrides.ClusterInfo = clientcmdapi.Cluster{Server: c.server, InsecureSkipTLSVerify: c.insecure}
	} else if c.insecure {
		overrides.ClusterInfo.InsecureSkipTLSVerify = true
	}
	overrides.ClusterInfo.CertificateAuthority = c.caFile
	if c.token != "" {
		overrides.AuthInfo.Token = c.token
	}
	if _, err := clientcmd.ParseTimeout(c.timeout); err != nil {
		return nil, fmt.Errorf("--request-timeout=%q: %w", c.timeout, err)
	}
	cluster, err := c.clusterFlag()
	if err != nil {
		return nil, err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no server to talk to: %w (give --server or a kubeconfig)", err)
	}
	ns := c.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "evctl"
	if c.warnings != nil {
		cfg.WarningHandlerWithContext = routedWarnings{fallback: rest.NewWarningWriter(c.warnings, rest.WarningWriterOptions{Deduplicate: true})}
	}
	clusters, err := kubeventsClusters(cfg)
	if err != nil {
		return nil, err
	}
	if cluster != "" {
		if err := checkCluster(context.Background(), clusters, cluster); err != nil {
			return nil, err
		}
		cfg.Host = strings.TrimRight(cfg.Host, "/") + clusterPath(cluster)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	wcfg := *cfg
	wcfg.Timeout = 0
	wcs, err := kubernetes.NewForConfig(&wcfg)
	if err != nil {
		return nil, err
	}
	group, err := pickGroup(c.apiGroup, cs.Discovery())
	if err != nil {
		return nil, err
	}
	lineages, err := kubeventsLineages(cfg)
	if err != nil {
		return nil, err
	}
	facets, err := kubeventsFacets(cfg)
	if err != nil {
		return nil, err
	}
	out := &clients{cs: cs, watch: wcs, events: upstreamEvents(cs), watchEvents: upstreamEvents(wcs), lineages: lineages,
		search:      restSearch(cs.EventsV1().RESTClient(), scheme.ParameterCodec),
		searchWatch: restSearchWatch(wcs.EventsV1().RESTClient(), scheme.ParameterCodec), facets: facets,
		group: group, timeout: cfg.Timeout, ns: ns, cluster: cluster, clusters: clusters, conn: *c}
	if group == groupKubevents {
		if out.events, err = kubeventsEvents(cfg); err != nil {
			return nil, err
		}
		rc, pc, err := kubeventsREST(cfg)
		if err != nil {
			return nil, err
		}
		out.search = restSearch(rc, pc)
		wrc, wpc, err := kubeventsREST(&wcfg)
		if err != nil {
			return nil, err
		}
		out.searchWatch = restSearchWatch(wrc, wpc)
		if out.watchEvents, err = kubeventsEvents(&wcfg); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errRequestTimeout is the cause of a request given up after
// --request-timeout.
var errRequestTimeout = errors.New("request timed out")

// timeoutError says that the server did not answer within --request-timeout.
type timeoutError struct {
	timeout time.Duration
	err     error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("the server did not answer within --request-timeout=%s: %v", e.timeout, e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

// explainTimeout names --request-timeout in err when err is a request that
// ran out of it, so that the user knows what gave up and what to change.
func explainTimeout(err error, timeout time.Duration) error {
	if err == nil || timeout <= 0 {
		return err
	}
	var te *timeoutError
	if errors.As(err, &te) {
		return err
	}
	var ne interface{ Timeout() bool }
	if errors.Is(err, errRequestTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
		return &timeoutError{timeout: timeout, err: err}
	}
	return err
}
