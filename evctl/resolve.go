package evctl

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

// target is the object a query is about.
type target struct {
	kind, apiVersion, name, namespace string
	namespaced                        bool
}

func (t target) String() string { return objectRef(t.kind, t.name) }

// resolveTarget turns KIND/NAME (kind as kubectl accepts it: pod, pods,
// po, deployment.apps, Deployment) into a target in namespace ns, through
// the server's discovery.
func resolveTarget(cs kubernetes.Interface, arg, ns string) (target, error) {
	kindArg, name, ok := strings.Cut(arg, "/")
	if !ok || kindArg == "" || name == "" {
		return target{}, fmt.Errorf("%q is not KIND/NAME (for example pod/web-1)", arg)
	}
	disc := memory.NewMemCacheClient(cs.Discovery())
	// Read discovery once up front: the mapper would retry a failing
	// discovery and then report the kind as unknown.
	if _, err := disc.ServerGroups(); err != nil {
		return target{}, fmt.Errorf("reading the server's discovery to look up %q: %w", kindArg, err)
	}
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(disc), disc, nil)
	gr := schema.ParseGroupResource(kindArg)
	gvk, err := mapper.KindFor(gr.WithVersion(""))
	if err != nil {
		// It may be a kind rather than a resource: Pod, Deployment.apps.
		gk := schema.ParseGroupKind(kindArg)
		m, err2 := mapper.RESTMapping(gk)
		switch {
		case err2 == nil:
			gvk = m.GroupVersionKind
		case meta.IsNoMatchError(err) && meta.IsNoMatchError(err2):
			return target{}, fmt.Errorf("the server doesn't have a resource type %q", kindArg)
		default:
			// Discovery itself failed (unreachable, timed out, refused).
			return target{}, fmt.Errorf("looking up %q in the server's discovery: %w", kindArg, err2)
		}
	}
	t := target{kind: gvk.Kind, apiVersion: gvk.GroupVersion().String(), name: name, namespaced: true}
	if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		t.namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
	}
	if t.namespaced {
		t.namespace = ns
	}
	return t, nil
}
