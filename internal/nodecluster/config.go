package nodecluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kubevents/kubevents/internal/kubeapiserver"
)

// kubeServiceRange is the Services' range (kube-apiserver's
// --service-cluster-ip-range).
const kubeServiceRange = kubeapiserver.ServiceClusterIPRange

// ClusterDomain is the cluster's DNS domain.
const ClusterDomain = "cluster.local"

// kubeletPort is where the kubelet serves (the node's address, in its own
// namespace: the standard port never collides).
const kubeletPort = 10250

// kubeletConfig is the kubelet's KubeletConfiguration. What this machine
// forces (../shared/reference/node-cluster.md): cgroup v1 allowed
// (failCgroupV1: false) with the cgroupfs driver and swap tolerated; the
// pods' cgroups under containerd's cgroup root, so that its Stop removes
// them. The kubelet's API answers anyone (anonymous, AlwaysAllow): it is
// reachable only from this host, through the node's veth, and
// kube-apiserver needs no client certificate for logs, exec and
// port-forward. Eviction and image garbage collection are set so that a
// nearly full disk of a test machine does not evict the test's pods.
type kubeletConfig struct {
	NodeIP, CgroupRoot, RuntimeEndpoint, ClusterDNS string
	ResolvConf, PodLogsDir, VolumePluginDir         string
}

func (k kubeletConfig) String() string {
	var dns string
	if k.ClusterDNS != "" {
		dns = "clusterDNS: [" + strconv.Quote(k.ClusterDNS) + "]\n"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]q
port: %[8]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: %[2]q
containerRuntimeEndpoint: %[3]q
clusterDomain: %[9]q
%[4]sresolvConf: %[5]q
podLogsDir: %[6]q
volumePluginDir: %[7]q
staticPodPath: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
  imagefs.inodesFree: 1%%
protectKernelDefaults: false
shutdownGracePeriod: 0s
`, k.NodeIP, k.CgroupRoot, k.RuntimeEndpoint, dns, k.ResolvConf, k.PodLogsDir, k.VolumePluginDir, kubeletPort, ClusterDomain)
}

// cniConfig is the node's pod network: a bridge (cni0, the pods'
// gateway) with addresses from host-local in the node's range, kept in
// ipamDir, and portmap for hostPort.
func cniConfig(podCIDR, ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubevents-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR, ipamDir)
}

// controllerManagerArgs are kube-controller-manager's flags: no serving
// port (nothing scrapes it), no leader election (one of it), the
// service-account key and root CA for the tokens and kube-root-ca.crt.
func controllerManagerArgs(kubeconfig, saKey, caFile, podCIDR string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + caFile,
		"--cluster-cidr=" + podCIDR,
		"--use-service-account-credentials=true",
	}
}

// schedulerArgs are kube-scheduler's flags.
func schedulerArgs(kubeconfig string) []string {
	return []string{"--kubeconfig=" + kubeconfig, "--secure-port=0", "--leader-elect=false"}
}

// kubeProxyArgs are kube-proxy's flags: iptables mode in the node's
// namespace, masquerading every Service's traffic (pods on one bridge
// reach each other through a Service without br_netfilter), leaving the
// host-wide conntrack sysctls alone.
func kubeProxyArgs(kubeconfig, nodeName, podCIDR string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + nodeName,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + podCIDR,
		"--masquerade-all=true",
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256",
	}
}

// nsenter prefixes a command to run it in the network namespace at path.
func nsenter(path, bin string, args ...string) (string, []string) {
	return "nsenter", append([]string{"--net=" + path, "--", bin}, args...)
}

// sanitize makes a user name a file name's part.
func sanitize(s string) string { return strings.NewReplacer(":", "_", "/", "_").Replace(s) }
