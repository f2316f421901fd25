package evctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage/clusterview"
)

// An eventsd serving a fleet of clusters serves each at /clusters/NAME/
// of its URL and all of them at once at /clusters/*/ (read-only, each
// event annotated with its cluster, eventapi.ClusterAnnotation), and
// lists them at /clusters/. --cluster and --all-clusters point evctl's
// clients there.

// clustersPath is the path of a fleet's clusters, below the server's URL.
const clustersPath = "/clusters/"

// fleetCluster names every cluster of a fleet at once, in a path.
const fleetCluster = "*"

// clusterPath is the path of cluster (fleetCluster for all) below the
// server's URL: what its clients' URL ends in.
func clusterPath(cluster string) string { return strings.TrimSuffix(clustersPath, "/") + "/" + cluster }

// clusterFlag returns the cluster --cluster or --all-clusters names: ""
// for neither (the server's root), fleetCluster for --all-clusters.
func (c *connFlags) clusterFlag() (string, error) {
	return clusterArg("--cluster", c.cluster, c.allClusters, "--all-clusters")
}

// fleet says whether evctl reads every cluster of a fleet at once.
func (c *connFlags) fleet() bool {
	cluster, err := c.clusterFlag()
	return err == nil && cluster == fleetCluster
}

// clusterArg checks a cluster named by the option what (a name, or
// fleetCluster for every one), and all, the option allWhat that names
// every cluster; it returns the cluster to read, "" for the root.
func clusterArg(what, name string, all bool, allWhat string) (string, error) {
	switch {
	case all && name != "":
		return "", fmt.Errorf("give %s or %s, not both", what, allWhat)
	case all, name == fleetCluster:
		return fleetCluster, nil
	case name == "":
		return "", nil
	}
	if why := clusterview.ValidName(name); why != "" {
		return "", fmt.Errorf("%s %q: a cluster's name %s", what, name, why)
	}
	return name, nil
}

// clustersIn lists the clusters of the fleet the server serves (GET
// /clusters/).
type clustersIn func(ctx context.Context) (*eventapi.ClusterList, error)

// kubeventsClusters lists the fleet's clusters with cfg, a configuration
// of the server's root (not of one of its clusters). A server that
// serves no fleet answers an empty list (eventsd) or 404 (any other).
func kubeventsClusters(cfg *rest.Config) (clustersIn, error) {
	rc, _, err := kubeventsREST(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*eventapi.ClusterList, error) {
		out := &eventapi.ClusterList{}
		if err := decodeResult(rc.Get().AbsPath(clustersPath).Do(ctx), out, "the server's clusters (GET "+clustersPath+")"); err != nil {
			return nil, err
		}
		return out, nil
	}, nil
}

// clusterNames returns the names of l's clusters.
func clusterNames(l *eventapi.ClusterList) []string {
	var names []string
	for _, c := range l.Items {
		names = append(names, c.Name)
	}
	return names
}

// checkCluster says, before anything is asked of it, when the server
// serves no cluster named cluster (fleetCluster: no fleet at all), with
// the clusters it does serve. A user who may not list the clusters (403)
// is not stopped: the server's own answers then say what is wrong.
func checkCluster(ctx context.Context, list clustersIn, cluster string) error {
	l, err := list(ctx)
	switch {
	case apierrors.IsForbidden(err):
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the server serves no fleet of clusters (GET %s: %w): drop --cluster and --all-clusters", clustersPath, err)
	case err != nil:
		return fmt.Errorf("reading the server's clusters (GET %s) to find cluster %q: %w", clustersPath, cluster, err)
	}
	names := clusterNames(l)
	switch {
	case len(names) == 0:
		return fmt.Errorf("the server serves no fleet of clusters: its events are at its root; drop --cluster and --all-clusters")
	case cluster != fleetCluster && !slices.Contains(names, cluster):
		return fmt.Errorf("the server serves no cluster %q; its clusters are: %s", cluster, strings.Join(names, ", "))
	}
	return nil
}

// clustersCommand is evctl clusters: the fleet's clusters.
func (e *env) clustersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "clusters",
		Short: "List the clusters of a fleet that eventsd serves (for --cluster and --all-clusters)",
		Long: `clusters lists the clusters of the fleet an eventsd serves (GET /clusters/ of
the server's URL): each is read with --cluster NAME (the server's URL +
/clusters/NAME), and all of them at once with --all-clusters (read-only, each
event with its cluster). ROOT marks the cluster the server's root serves
too; READ-ONLY a cluster whose events eventsd mirrors, so only eventsd
writes them. An eventsd without a fleet lists none.`,
		Example: `  evctl clusters
  evctl get -A --cluster east
  evctl search 'object.type == "Warning"' -A --all-clusters --since 1h`,
		Args: cobra.NoArgs,
		RunE: e.runE(func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(e.output); err != nil {
				return err
			}
			if cluster, err := e.conn.clusterFlag(); err != nil {
				return err
			} else if cluster != "" {
				return fmt.Errorf("evctl clusters lists every cluster of the server: it takes no --cluster or --all-clusters")
			}
			c, err := e.conn.client()
			if err != nil {
				return err
			}
			e.timeout = c.timeout
			l, err := c.clusters(cmd.Context())
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("the server serves no fleet of clusters (GET %s: %w)", clustersPath, err)
			}
			if err != nil {
				return fmt.Errorf("listing the server's clusters: %w", err)
			}
			return printClusters(e.out, e.errOut, e.output, l)
		}),
	}
}

// printClusters writes l as a table (NAME, ROOT, READ-ONLY), or as JSON
// or YAML; an empty table is a note on errOut.
func printClusters(out, errOut io.Writer, output string, l *eventapi.ClusterList) error {
	switch output {
	case "json", "yaml":
		b, err := json.MarshalIndent(l, "", "    ")
		if err != nil {
			return err
		}
		if output == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		} else {
			b = append(b, '\n')
		}
		_, err = out.Write(b)
		return err
	}
	if len(l.Items) == 0 {
		fmt.Fprintln(errOut, "The server serves no fleet of clusters: its events are at its root.")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROOT\tREAD-ONLY")
	yes := map[bool]string{true: "yes", false: "no"}
	for _, c := range l.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, yes[c.Root], yes[c.ReadOnly])
	}
	return tw.Flush()
}

// clusterOf is the cluster of an event read across a fleet (its
// eventapi.ClusterAnnotation), "" for another.
func clusterOf(r *row) string { return r.ev.Annotations[eventapi.ClusterAnnotation] }
