package storage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClusterNamespace(t *testing.T) {
	for _, tc := range []struct{ c, ns, sns string }{
		{"", "shop", "shop"},
		{"east", "shop", "~east~shop"},
		{"a-b", "default", "~a-b~default"},
	} {
		if got := ClusterNamespace(tc.c, tc.ns); got != tc.sns {
			t.Errorf("ClusterNamespace(%q, %q) = %q, want %q", tc.c, tc.ns, got, tc.sns)
		}
		if c, ns := SplitClusterNamespace(tc.sns); c != tc.c || ns != tc.ns {
			t.Errorf("SplitClusterNamespace(%q) = %q, %q, want %q, %q", tc.sns, c, ns, tc.c, tc.ns)
		}
	}
	if ValidRequestNamespace("~east~shop") || !ValidRequestNamespace("shop") {
		t.Error("ValidRequestNamespace accepts a storage namespace of a cluster, or refuses a namespace")
	}
}

// TestClustersRanges checks that each selection's key range holds exactly
// the keys Contains accepts, clusters whose names prefix each other's
// included.
func TestClustersRanges(t *testing.T) {
	keys := []string{}
	for _, c := range []string{"", "a", "a-b", "ab", "b", "z9"} {
		for _, ns := range []string{"default", "kube-system", "z"} {
			keys = append(keys, ClusterNamespace(c, ns)+"/ev")
		}
	}
	for _, sel := range []Clusters{AnyCluster(), OneCluster(""), OneCluster("a"), OneCluster("a-b"), OneCluster("z9"), OneCluster("none"), NamedClusters()} {
		from, to := sel.KeyRange()
		n := 0
		for _, k := range keys {
			sns := k[:len(k)-len("/ev")]
			inRange := k >= from && (to == "" || k < to)
			if inRange != sel.Contains(sns) {
				t.Errorf("%s: key %q in range [%q, %q) = %v, Contains = %v", sel, k, from, to, inRange, sel.Contains(sns))
			}
			if inRange {
				n++
			}
		}
		want := map[string]int{"every cluster": 18, "cluster (root)": 3, "cluster a": 3, "cluster a-b": 3, "cluster z9": 3, "cluster none": 0, "every named cluster": 15}[sel.String()]
		if n != want {
			t.Errorf("%s selects %d keys, want %d", sel, n, want)
		}
	}
}

func TestSelectorClusters(t *testing.T) {
	ev := func(sns string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: sns, Name: "x"}}
	}
	east := Selector{Clusters: OneCluster("east")}
	if !east.Matches(ev("~east~shop")) || east.Matches(ev("~west~shop")) || east.Matches(ev("shop")) {
		t.Error("a selection of cluster east matches another cluster's event or misses its own")
	}
	root := Selector{Clusters: OneCluster("")}
	if !root.Matches(ev("shop")) || root.Matches(ev("~east~shop")) {
		t.Error("a selection of the root cluster matches a named cluster's event or misses its own")
	}
	if east.SelectsAll() || !(Selector{Namespace: "~east~shop", Clusters: OneCluster("east")}).SelectsAll() || !(Selector{}).SelectsAll() {
		t.Error("SelectsAll is wrong for a cluster's selection")
	}
}
