package containerdproc

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's labels on sandboxes and containers (pkg/kubelet/types).
const (
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelContainerName = "io.kubernetes.container.name"
)

// Pod is a pod run through CRI as the kubelet runs one: a sandbox on the
// host's network (no CNI here) under this containerd's cgroup parent,
// labelled with the pod's identity, and containers created in it with
// the kubelet's labels and attempt numbers.
type Pod struct {
	UID, Namespace, Name string
	// SandboxID is the sandbox's ID.
	SandboxID string
	config    *runtimeapi.PodSandboxConfig
}

// RunPod runs a pod's sandbox.
func (c *Containerd) RunPod(ctx context.Context, rt runtimeapi.RuntimeServiceClient, uid, namespace, name string) (*Pod, error) {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		Labels:   map[string]string{LabelPodUID: uid, LabelPodName: name, LabelPodNamespace: namespace},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: c.CgroupParent(uid),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	resp, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return nil, fmt.Errorf("containerdproc: running the sandbox of pod %s/%s: %w", namespace, name, err)
	}
	return &Pod{UID: uid, Namespace: namespace, Name: name, SandboxID: resp.PodSandboxId, config: cfg}, nil
}

// CreateContainer creates a container of the pod running command (a
// shell command line) as the kubelet would, with the kubelet's labels and
// attempt, and returns its ID. Labels, when given, are added (and may
// replace the kubelet's: a test of a container the kubelet did not make).
func (p *Pod) CreateContainer(ctx context.Context, rt runtimeapi.RuntimeServiceClient, name string, attempt uint32, command string, labels map[string]string) (string, error) {
	l := map[string]string{LabelPodUID: p.UID, LabelPodName: p.Name, LabelPodNamespace: p.Namespace, LabelContainerName: name}
	for k, v := range labels {
		if v == "" {
			delete(l, k)
		} else {
			l[k] = v
		}
	}
	resp, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: p.SandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
			Image:    &runtimeapi.ImageSpec{Image: Image},
			Command:  []string{"/bin/sh", "-c", command},
			Labels:   l,
			Linux:    &runtimeapi.LinuxContainerConfig{},
		},
		SandboxConfig: p.config,
	})
	if err != nil {
		return "", fmt.Errorf("containerdproc: creating container %s (attempt %d) of pod %s: %w", name, attempt, p.Name, err)
	}
	return resp.ContainerId, nil
}

// StartContainer creates and starts a container (CreateContainer).
func (p *Pod) StartContainer(ctx context.Context, rt runtimeapi.RuntimeServiceClient, name string, attempt uint32, command string) (string, error) {
	id, err := p.CreateContainer(ctx, rt, name, attempt, command, nil)
	if err != nil {
		return "", err
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		return id, fmt.Errorf("containerdproc: starting container %s of pod %s: %w", name, p.Name, err)
	}
	return id, nil
}

// Remove stops and removes the pod's sandbox and so its containers.
func (p *Pod) Remove(ctx context.Context, rt runtimeapi.RuntimeServiceClient) error {
	if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.SandboxID}); err != nil {
		return fmt.Errorf("containerdproc: stopping pod %s: %w", p.Name, err)
	}
	if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.SandboxID}); err != nil {
		return fmt.Errorf("containerdproc: removing pod %s: %w", p.Name, err)
	}
	return nil
}
