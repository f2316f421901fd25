package nodecluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Addresses of a node's network, for its index N (1 to maxNetworks):
// the host's and the node's sides of the veth pair in 172.31.N.0/30, the
// pods' range 10.244.N.0/24. N is chosen so that no address or route on
// the host already uses either, so that clusters can run side by side.
const (
	linkPrefix = "172.31."
	podPrefix  = "10.244."
	// maxNetworks is how many nodes can run on one host at once.
	maxNetworks = 250
)

// network is a node's network namespace and its veth pair.
type network struct {
	// name is the namespace's (ip netns) and, shortened, the devices'.
	name string
	// index is N in the addresses.
	index int
	// hostIf is the host's end of the veth pair.
	hostIf string
}

// NetNSPath is the namespace's path, for nsenter --net.
func (n *network) NetNSPath() string { return "/run/netns/" + n.name }

// HostIP is the host's address on the veth pair: kube-apiserver's and
// the DNS server's.
func (n *network) HostIP() string { return fmt.Sprintf("%s%d.1", linkPrefix, n.index) }

// NodeIP is the node's address: its InternalIP, where the kubelet serves.
func (n *network) NodeIP() string { return fmt.Sprintf("%s%d.2", linkPrefix, n.index) }

// PodCIDR is the pods' range on the node's bridge.
func (n *network) PodCIDR() string { return fmt.Sprintf("%s%d.0/24", podPrefix, n.index) }

// run runs a command, with its output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// canNetwork says why a node's network cannot be made here, or nil: it
// needs ip (iproute2), nsenter and iptables, and network namespaces.
func canNetwork() error {
	for _, cmd := range []string{"ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%s is not installed (iproute2, util-linux, iptables): %w", cmd, err)
		}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("the kernel has no network namespaces: %w", err)
	}
	return nil
}

// newNetwork makes a node's namespace and veth pair, on addresses no other
// network of the host uses (one allocation at a time across processes,
// under the lock file lockPath).
func newNetwork(lockPath string) (*network, error) {
	unlock, err := lock(lockPath)
	if err != nil {
		return nil, err
	}
	defer unlock()
	used, err := usedIndexes()
	if err != nil {
		return nil, err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b[:])
	n := &network{name: "kvnode-" + id, hostIf: "kvh" + id}
	start := int(b[0])%maxNetworks + 1
	for i := range maxNetworks {
		if idx := (start+i-1)%maxNetworks + 1; !used[idx] {
			n.index = idx
			break
		}
	}
	if n.index == 0 {
		return nil, fmt.Errorf("nodecluster: every one of the %d node networks (%sN.0/30, %sN.0/24) is in use on this host", maxNetworks, linkPrefix, podPrefix)
	}
	if err := n.setUp(id); err != nil {
		return n, errors.Join(err, n.tearDown())
	}
	return n, nil
}

func (n *network) setUp(id string) error {
	nodeIf := "kvn" + id
	ns := []string{"netns", "exec", n.name}
	steps := [][]string{
		{"netns", "add", n.name},
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", nodeIf},
		{"link", "set", nodeIf, "netns", n.name},
		{"addr", "add", n.HostIP() + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		append(ns, "ip", "link", "set", "lo", "up"),
		append(ns, "ip", "link", "set", nodeIf, "name", "eth0"),
		append(ns, "ip", "addr", "add", n.NodeIP()+"/30", "dev", "eth0"),
		append(ns, "ip", "link", "set", "eth0", "up"),
		// Services' addresses go out through eth0 until kube-proxy's
		// rules rewrite them; there is no default route.
		append(ns, "ip", "route", "add", kubeServiceRange, "dev", "eth0"),
		// The node routes between its pods' bridge and the host.
		append(ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"),
		{"route", "add", n.PodCIDR(), "via", n.NodeIP(), "dev", n.hostIf},
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return fmt.Errorf("nodecluster: setting up the node's network: %w", err)
		}
	}
	return nil
}

// tearDown deletes the namespace (with everything in it: the bridge, the
// pods' veths, kube-proxy's rules, the node's end of the pair) and the
// host's end of the pair, with its route. What is already gone is not an
// error.
func (n *network) tearDown() error {
	var errs []error
	if _, err := os.Stat(n.NetNSPath()); err == nil {
		if err := run("ip", "netns", "del", n.name); err != nil {
			errs = append(errs, err)
		}
	}
	// The host's end goes with the namespace's, asynchronously: gone
	// between the look and the deletion is gone.
	if _, err := net.InterfaceByName(n.hostIf); err == nil {
		if err := run("ip", "link", "del", n.hostIf); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("nodecluster: removing the node's network: %w", errors.Join(errs...))
	}
	return nil
}

// usedIndexes are the N whose link or pod range an address or route of
// the host already uses.
func usedIndexes() (map[int]bool, error) {
	used := map[int]bool{}
	var text strings.Builder
	for _, args := range [][]string{{"-4", "addr", "show"}, {"-4", "route", "show"}} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			return nil, fmt.Errorf("nodecluster: ip %s: %w", strings.Join(args, " "), err)
		}
		text.Write(out)
	}
	for _, f := range strings.Fields(text.String()) {
		for _, p := range []string{linkPrefix, podPrefix} {
			rest, ok := strings.CutPrefix(f, p)
			if !ok {
				continue
			}
			var idx int
			if _, err := fmt.Sscanf(rest, "%d.", &idx); err == nil {
				used[idx] = true
			}
		}
	}
	return used, nil
}

// lock takes an exclusive lock on path, waiting for it.
func lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("nodecluster: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("nodecluster: locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
