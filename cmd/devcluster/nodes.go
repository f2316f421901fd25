package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kubevents/kubevents/internal/etcdproc"
	"github.com/kubevents/kubevents/internal/nodecluster"
)

// runNodes builds (--build-only) or runs a single-node cluster until ctx
// ends.
func runNodes(ctx context.Context, o options, out io.Writer) error {
	logf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	if o.buildOnly {
		t0 := time.Now()
		// As build: a missing etcd module fails before minutes of builds.
		if err := etcdproc.Fetch(); err != nil {
			return err
		}
		if missing := nodecluster.Cached(); len(missing) > 0 {
			for _, m := range missing {
				logf("to build: %s", m)
			}
			logf("(a first build of the node's Kubernetes components takes tens of CPU-minutes; go build -v shows progress if run by hand in tools/kubernetes)")
		}
		b, err := nodecluster.Build(logf)
		if err != nil {
			return err
		}
		logf("kubelet, kube-controller-manager, kube-scheduler, kube-proxy %s: %s", b.Kubernetes.Version, b.Kubernetes.Dir)
		logf("CNI plugins %s: %s", b.CNI.Version, b.CNI.Dir)
		logf("containerd %s: %s", b.Containerd.Version, b.Containerd.Dir)
		logf("(%v)", time.Since(t0).Round(time.Second))
		return nil
	}
	if err := nodecluster.CanRun(); err != nil {
		return err
	}
	if o.dir != "" {
		if err := os.MkdirAll(o.dir, 0o755); err != nil {
			return err
		}
	}
	c, err := nodecluster.Launch(ctx, nodecluster.Options{
		Dir:           o.dir,
		EventTTL:      o.eventTTL,
		APIServerArgs: o.apiserverArgs,
		Logf:          logf,
	})
	defer func() {
		if c != nil {
			logf("stopping")
			if err := c.Stop(); err != nil {
				logf("stopping: %v", err)
			}
		}
	}()
	if err != nil {
		return err
	}
	if err := copyKubeconfig(c.Kubeconfig(), o.kubeconfig); err != nil {
		return err
	}
	if o.kubeconfig != "" {
		logf("kubeconfig also written to %s", o.kubeconfig)
	}
	logf("KUBECONFIG=%s", c.Kubeconfig())
	logf("node %s at %s, pods in %s; image without a pull: %s", nodecluster.NodeName, c.NodeIP(), c.PodCIDR(), nodecluster.Image)
	logf("import an image: ctr --address %s -n k8s.io images import IMAGE.tar", c.Containerd().Socket())
	logf("Ctrl-C stops everything.")
	select {
	case <-ctx.Done():
	case <-c.APIServer().Exited():
		return fmt.Errorf("kube-apiserver exited:\n%s", c.LogTails(20))
	}
	return nil
}
