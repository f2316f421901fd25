package fakecri

import (
	"maps"
	"time"

	"google.golang.org/grpc/codes"
)

// Faults are the misbehaviours the runtime can be told to show. Set them
// all at once with SetFaults, change some with UpdateFaults, read them with
// Faults; the one-shot actions are BreakStreams, Refuse, DropNext and
// Flush. Everything is goroutine-safe and takes effect at the next RPC or
// event. The zero value is a well-behaved runtime.
type Faults struct {
	// Unimplemented makes GetContainerEvents answer codes.Unimplemented
	// ("method GetContainerEvents not implemented"), like containerd 1.6.
	// gRPC opens server streams lazily, so the client's GetContainerEvents
	// call succeeds and the error surfaces at the first Recv.
	Unimplemented bool
	// EventsDisabled makes GetContainerEvents return at once with OK, like
	// CRI-O with enable_pod_events=false: the client's first Recv gets
	// io.EOF.
	EventsDisabled bool
	// DropNext is how many of the next events to drop without sending
	// (Stats.FaultDropped); it counts down as events are dropped.
	DropNext int
	// Duplicate sends every event twice.
	Duplicate bool
	// Reorder holds each event and sends it after the next one, so
	// e1 e2 e3 e4 leave as e2 e1 e4 e3. A held event leaves with the next
	// event, or at Flush; turning Reorder off does not release it by itself.
	Reorder bool
	// Delay delivers events this long after they were produced, on the
	// runtime clock. Delayed events keep their order (and their created_at)
	// and events produced while earlier ones are still delayed queue behind
	// them. The state change that produced a delayed event does not block
	// in BufferBlock; the delivery does.
	Delay time.Duration
	// NilSandboxStatus sends events with a nil pod_sandbox_status (as
	// containerd does when it cannot fetch the sandbox status).
	NilSandboxStatus bool
	// FailSandboxStatus makes PodSandboxStatus answer codes.Unknown.
	FailSandboxStatus bool
	// FailRPC makes the named RPCs (the method name, e.g. "ListPodSandbox",
	// "ListContainers", "ContainerStatus") answer with the given code.
	FailRPC map[string]codes.Code
	// TimestampWithoutStatuses makes PodSandboxStatus return a timestamp
	// (≠ 0) and no containers_statuses, like containerd 2.0.0-2.0.2, even
	// with Options.StatusWithContainers.
	TimestampWithoutStatuses bool
	// FutureTimestamps moves event created_at and PodSandboxStatusResponse
	// timestamps this far into the future.
	FutureTimestamps time.Duration
	// SecondsTimestamps sends event created_at and PodSandboxStatusResponse
	// timestamps in seconds instead of nanoseconds, like CRI-O before 1.32.
	SecondsTimestamps bool
}

// stamp applies the timestamp faults to ns, a runtime-clock time in ns.
func (f *Faults) stamp(ns int64) int64 {
	ns += int64(f.FutureTimestamps)
	if f.SecondsTimestamps {
		ns /= int64(time.Second)
	}
	return ns
}

// clone returns a copy of f that shares no map with it.
func (f Faults) clone() Faults {
	f.FailRPC = maps.Clone(f.FailRPC)
	return f
}

// Faults returns the current faults.
func (r *Runtime) Faults() Faults {
	r.faultsMu.Lock()
	defer r.faultsMu.Unlock()
	return r.faults.clone()
}

// snapshotLocked returns a copy of the current faults without FailRPC,
// which it leaves nil rather than clone: FailRPC must not be used from it
// (read it through Faults). The caller holds faultsMu.
func (r *Runtime) snapshotLocked() Faults {
	f := r.faults
	f.FailRPC = nil
	return f
}

// faultsSnapshot returns the current faults as snapshotLocked does, for
// the paths (one per event) that do not read FailRPC: FailRPC must not be
// used from it.
func (r *Runtime) faultsSnapshot() Faults {
	r.faultsMu.Lock()
	defer r.faultsMu.Unlock()
	return r.snapshotLocked()
}

// SetFaults replaces every fault with f (the zero Faults clears them).
func (r *Runtime) SetFaults(f Faults) {
	r.faultsMu.Lock()
	r.faults = f.clone()
	r.faultsMu.Unlock()
	r.log.Info("faults set", "faults", f)
}

// UpdateFaults changes the faults with fn, atomically. fn runs under the
// faults' lock and must not call the Runtime.
func (r *Runtime) UpdateFaults(fn func(*Faults)) {
	r.faultsMu.Lock()
	f := r.faults.clone()
	fn(&f)
	r.faults = f
	r.faultsMu.Unlock()
	r.log.Info("faults set", "faults", f)
}

// DropNext drops the next n events without sending them (adds n to
// Faults.DropNext).
func (r *Runtime) DropNext(n int) {
	r.UpdateFaults(func(f *Faults) { f.DropNext += n })
}

// takeDrop reports whether the next event is to be dropped, counting
// Faults.DropNext down, and returns, under the same lock, the faults
// after the count-down as faultsSnapshot does (FailRPC must not be used
// from them).
func (r *Runtime) takeDrop() (drop bool, f Faults) {
	r.faultsMu.Lock()
	defer r.faultsMu.Unlock()
	if r.faults.DropNext > 0 {
		r.faults.DropNext--
		drop = true
	}
	return drop, r.snapshotLocked()
}

// BreakStreams ends every open GetContainerEvents stream with
// codes.Unavailable. Events buffered for those streams are lost; later
// events follow the buffer mode's rules for "no subscriber" (BufferBlock
// keeps them for the next subscriber).
func (r *Runtime) BreakStreams() {
	n := r.ev.breakAll("fakecri: event stream broken")
	r.log.Info("BreakStreams", "streams", n)
}

// Refuse simulates a runtime restart lasting d on the runtime clock: every
// RPC, GetContainerEvents included, answers codes.Unavailable until the
// clock reaches now+d; open streams end with codes.Unavailable; and
// everything the runtime held in memory for event delivery (buffered,
// held, delayed and stale events) is lost, as are events produced while it
// refuses (Stats.Lost). The sandboxes and containers survive.
func (r *Runtime) Refuse(d time.Duration) {
	r.faultsMu.Lock()
	r.refuseUntil = r.clk.Now().Add(d)
	r.faultsMu.Unlock()
	r.ev.reset()
	r.log.Info("Refuse", "for", d)
}

// refusing reports whether the runtime is refusing (see Refuse).
func (r *Runtime) refusing() bool {
	r.faultsMu.Lock()
	defer r.faultsMu.Unlock()
	return r.clk.Now().Before(r.refuseUntil)
}

// Flush sends the event held by Faults.Reorder, if any.
func (r *Runtime) Flush() {
	r.opMu.Lock()
	defer r.opMu.Unlock()
	r.ev.flushHeld()
}

// RPCHook is called around every RPC the Server serves (GetContainerEvents
// included): with after=false before anything else, after=true once a
// unary RPC's response (or error) is computed, before it is returned. It
// may block, to hold an RPC at a chosen point, and may change the runtime
// (for example emit an event while a PodSandboxStatus response computed
// earlier is still on its way: §7 scenario 17).
type RPCHook func(method string, after bool)

// SetRPCHook installs h (nil removes it).
func (r *Runtime) SetRPCHook(h RPCHook) {
	r.faultsMu.Lock()
	defer r.faultsMu.Unlock()
	r.hook = h
}

func (r *Runtime) rpcHook() RPCHook {
	r.faultsMu.Lock()
	defer r.faultsMu.Unlock()
	return r.hook
}
