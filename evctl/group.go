package evctl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubevents/kubevents/eventapi"
)

// The values of --api-group.
const (
	groupAuto      = "auto"
	groupUpstream  = "events.k8s.io"
	groupKubevents = "events.kubevents.io"
	// aggregatorGroup is served by kube-apiserver's aggregator and never
	// by eventsd: a server listing it and eventsd's group is a cluster
	// with eventsd registered as an APIService.
	aggregatorGroup = "apiregistration.k8s.io"
)

// eventsClient is what a querier reads events with: client-go's typed
// events.k8s.io/v1 client, or the same calls on eventsd's own group.
type eventsClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*eventsv1.EventList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// eventsIn returns the events client of namespace ns ("" for all).
type eventsIn func(ns string) eventsClient

// upstreamEvents reads events.k8s.io/v1 with cs.
func upstreamEvents(cs kubernetes.Interface) eventsIn {
	return func(ns string) eventsClient { return cs.EventsV1().Events(ns) }
}

// pickGroup resolves --api-group: auto is events.kubevents.io when the
// server is a cluster's kube-apiserver with eventsd's group registered
// (the only way to reach eventsd's store through it: its events.k8s.io
// is its own), else events.k8s.io, which every events server serves (an
// eventsd reached directly, a kube-apiserver without eventsd). A server
// whose discovery cannot be read gets events.k8s.io: the list then says
// what is wrong with the server.
func pickGroup(flag string, disc discovery.DiscoveryInterface) (string, error) {
	switch flag {
	case groupUpstream, groupKubevents:
		return flag, nil
	case groupAuto, "":
	default:
		return "", fmt.Errorf("valid --api-group values are %s, %s or %s, not %q", groupAuto, groupUpstream, groupKubevents, flag)
	}
	groups, err := disc.ServerGroups()
	if err != nil {
		return groupUpstream, nil
	}
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	if slices.Contains(names, groupKubevents) && slices.Contains(names, aggregatorGroup) {
		return groupKubevents, nil
	}
	return groupUpstream, nil
}

// kubeventsEvents reads events.kubevents.io/v1 with cfg. client-go's
// typed client cannot: it encodes list options with its own scheme,
// which does not know the group.
func kubeventsEvents(cfg *rest.Config) (eventsIn, error) {
	rc, pc, err := kubeventsREST(cfg)
	if err != nil {
		return nil, err
	}
	return func(ns string) eventsClient { return &kubeventsClient{rc: rc, pc: pc, ns: ns} }, nil
}

// kubeventsREST returns a REST client of events.kubevents.io/v1 with cfg,
// and the codec of its list options.
func kubeventsREST(cfg *rest.Config) (rest.Interface, runtime.ParameterCodec, error) {
	s := runtime.NewScheme()
	if err := eventapi.AddKubeventsToScheme(s); err != nil {
		return nil, nil, err
	}
	c := rest.CopyConfig(cfg)
	gv := eventapi.KubeventsGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, nil, fmt.Errorf("a client of %s: %w", gv, err)
	}
	return rc, runtime.NewParameterCodec(s), nil
}

// lineagesIn lists the lineages (eventsd's events.kubevents.io/v1
// lineages: a family's objects) in namespace ns ("" for all) that the
// family field selector selects.
type lineagesIn func(ctx context.Context, ns, selector string) (*eventapi.LineageList, error)

// kubeventsLineages lists eventsd's lineages with cfg. Any server may be
// asked: one without them answers 404.
func kubeventsLineages(cfg *rest.Config) (lineagesIn, error) {
	rc, _, err := kubeventsREST(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ns, selector string) (*eventapi.LineageList, error) {
		res := rc.Get().Namespace(ns).Resource(eventapi.LineageResource).Param("fieldSelector", selector).Do(ctx)
		out := &eventapi.LineageList{}
		if err := decodeResult(res, out, fmt.Sprintf("the %s of %s", eventapi.LineageResource, selector)); err != nil {
			return nil, err
		}
		return out, nil
	}, nil
}

// facetsIn summarizes the events of namespace ns ("" for all) that the
// query's parameters (fieldSelector, filter, since, until, top, bucket)
// select: eventsd's events.kubevents.io/v1 facets.
type facetsIn func(ctx context.Context, ns string, params map[string]string) (*eventapi.FacetList, error)

// kubeventsFacets reads eventsd's facets with cfg. A server without them
// answers 404.
func kubeventsFacets(cfg *rest.Config) (facetsIn, error) {
	rc, _, err := kubeventsREST(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ns string, params map[string]string) (*eventapi.FacetList, error) {
		req := rc.Get().Namespace(ns).Resource(eventapi.FacetResource)
		for k, v := range params {
			if v != "" {
				req = req.Param(k, v)
			}
		}
		out := &eventapi.FacetList{}
		if err := decodeResult(req.Do(ctx), out, "the "+eventapi.FacetResource); err != nil {
			return nil, err
		}
		return out, nil
	}, nil
}

// decodeResult reads the JSON of res, an answer of eventsd's own, into
// out; a refused request is the server's Status, as an error. what names
// the answer in the error of a body that is not what it should be.
func decodeResult(res rest.Result, out any, what string) error {
	if err := res.Error(); err != nil {
		return err // Error, unlike Raw, reads the server's Status
	}
	raw, err := res.Raw()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	return nil
}

// kubeventsClient is eventsClient over events.kubevents.io/v1.
type kubeventsClient struct {
	rc rest.Interface
	pc runtime.ParameterCodec
	ns string
}

func (k *kubeventsClient) List(ctx context.Context, opts metav1.ListOptions) (*eventsv1.EventList, error) {
	out := &eventsv1.EventList{}
	err := k.rc.Get().Namespace(k.ns).Resource("events").VersionedParams(&opts, k.pc).Do(ctx).Into(out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (k *kubeventsClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return k.rc.Get().Namespace(k.ns).Resource("events").VersionedParams(&opts, k.pc).Watch(ctx)
}
