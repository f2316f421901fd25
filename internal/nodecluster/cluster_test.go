package nodecluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeReady(t *testing.T) {
	c := StartTest(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, err := c.Client().CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !isReady(node) {
		t.Fatalf("node not Ready: %+v", node.Status.Conditions)
	}
	var ip string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip != c.NodeIP() {
		t.Errorf("node's InternalIP %q, want %q", ip, c.NodeIP())
	}
}
