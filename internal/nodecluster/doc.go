// Package nodecluster runs a real single-node Kubernetes cluster on this
// machine for tests and for trying eventsd (`go run ./cmd/devcluster
// --nodes`): etcd and kube-apiserver (internal/kubeapiserver),
// kube-controller-manager, kube-scheduler, containerd 2.x with runc
// (internal/containerdproc), the CNI plugins bridge, host-local, loopback
// and portmap, a kubelet, kube-proxy and a cluster DNS server
// (internal/clusterdns), every Kubernetes component built unchanged from
// the module proxy (tools/kubernetes, tools/cni) and cached in the user
// cache directory like kube-apiserver.
//
// # Network
//
// The node is a network namespace of its own, joined to the host by a
// veth pair with a /30 of 172.31.N.0: the host's side (.1) is where
// kube-apiserver listens and advertises itself (the kubernetes Service's
// endpoint) and where the DNS server answers; the node's side (.2) is the
// node's InternalIP, where the kubelet serves. containerd, its shims, the
// CNI plugins, the kubelet and kube-proxy run inside the namespace
// (nsenter), so the bridge (cni0, 10.244.N.0/24), the pods' veths and
// kube-proxy's iptables rules are all in it and go with it. The namespace
// has no default route: nothing a pod sends can leave the machine. The
// host routes the pod range to the node, so that tests, kubectl and the
// aggregator (--enable-aggregator-routing) reach pods directly.
//
// # Images
//
// Nothing is pulled: internal/containerdproc makes two images from
// Debian's busybox-static, the pause image every sandbox runs (a shell
// that waits, reaps and ends at SIGTERM) and busybox for test workloads
// (Image); other images (eventsd's, from tools/image) are imported with
// ImportImage.
//
// # Storage
//
// A default StorageClass (local, no provisioner, WaitForFirstConsumer)
// with a few local PersistentVolumes in directories of the cluster's, so
// that a StatefulSet's claims bind.
//
// Stop ends every process it started, the pods (through containerd),
// their mounts and cgroups, the network namespace and the veth pair.
package nodecluster
