// Package fakecri is a scriptable fake CRI runtime for testing a Pod
// Lifecycle Event Generator (package pleg) and anything else that talks to
// a CRI RuntimeService: an in-memory set of sandboxes and containers,
// served over gRPC, with the container event stream (GetContainerEvents)
// of a real runtime and the ways real runtimes misbehave.
//
// # Runtime and state
//
// New(Options) returns a Runtime. Its state API changes sandboxes and
// containers and emits the events containerd 2.x emits for each change:
//
//	RunPodSandbox(uid, ns, name, attempt) -> ID  sandbox READY with an IP; CREATED, STARTED
//	StopPodSandbox(id)                          running containers exit 137 (STOPPED each); NOTREADY, IP cleared; STOPPED
//	RemovePodSandbox(id)                        stop if READY; containers removed (DELETED each); DELETED
//	CreateContainer(sandboxID, name, attempt)   CREATED; CREATED
//	StartContainer(id)                          RUNNING, started_at; STARTED
//	StopContainer(id, exitCode)                 EXITED, finished_at, reason Completed/Error; STOPPED
//	RemoveContainer(id)                         (STOPPED if running) gone; DELETED
//	SetContainerState(id, state, exit)          silent: no event (a missed event)
//	SetSandboxIP(id, ip), SetSandboxState       silent
//
// RunPodSandboxSpec and CreateContainerSpec set explicit IDs, labels and
// images; generated IDs are "s1", "s2", ... for sandboxes and "c1", "c2",
// ... for containers, sandbox IPs 10.0.x.y. Sandboxes and containers carry
// the kubelet's labels (LabelPodUID, ...). Pods, ContainerStatusOf and
// SandboxStatusOf read the state.
//
// Every event has container_id = the container ID (the sandbox ID for
// sandbox events), created_at = the runtime clock (Options.Clock) in ns,
// pod_sandbox_status = the sandbox status at event time, and
// containers_statuses = the pod's containers (never the sandbox). A
// DELETED event is built after the removal, so it no longer lists the
// removed container; a sandbox DELETED event carries the last sandbox
// status (NOTREADY).
//
// # gRPC
//
// Server (from Runtime.Server) implements runtimeapi.RuntimeServiceServer:
// Version, Status, ListPodSandbox (filters id, state, label selector),
// PodSandboxStatus, ListContainers (filters id, state, pod_sandbox_id,
// label selector), ContainerStatus, GetContainerEvents (server stream),
// and the sandbox/container lifecycle RPCs through the state API.
// PodSandboxStatus fills containers_statuses and timestamp only with
// Options.StatusWithContainers (CRI-O with pod events); by default it sets
// neither (containerd). Register puts it on a *grpc.Server; Listen serves
// it on "unix:///path" or "tcp://127.0.0.1:0"; Dial connects in-process
// over bufconn. Calls counts every RPC per method, ResetCalls clears the
// counts. GetContainerEvents sends its response headers with the first
// event, as real runtimes do, or at once with Options.EagerStreamHeaders.
//
// # Event buffering
//
// Options.Mode picks the runtime whose buffering is reproduced:
// BufferBlock (containerd 2.x: a buffer of 100 per subscriber, every event
// to every subscriber, the publisher blocks while a buffer is full, and
// with no subscriber events are kept 5 minutes and replayed, stale, to the
// next one), BufferDrop (containerd 1.7: one shared buffer of 1000,
// dropping and counting when full, each event to one subscriber) and
// BufferDropBroadcast (CRI-O: the shared dropping buffer plus a broadcaster
// that waits for every subscriber in turn). Stats reports what was
// published, delivered, dropped, expired and lost. Subscribe gives an
// in-process subscription with the same semantics, without gRPC.
//
// # Faults
//
// SetFaults, UpdateFaults and Faults manage the Faults struct:
// Unimplemented, EventsDisabled, DropNext, Duplicate, Reorder, Delay,
// NilSandboxStatus, FailSandboxStatus, FailRPC, TimestampWithoutStatuses,
// FutureTimestamps, SecondsTimestamps. The actions are BreakStreams (end
// every stream with Unavailable), Refuse(d) (a restart: every RPC answers
// Unavailable for d on the runtime clock, streams end, in-memory events
// are lost), DropNext(n) and Flush (release the event Reorder holds).
// SetRPCHook runs a function before and after each RPC, to hold a
// response or change the state at an exact point.
//
// # Scenarios
//
// RunScenario runs "steady" (N pods × M running containers), "crashloop"
// (pod "crash", container "app" exiting non-zero and recreated with
// attempt+1 after 10 s, 20 s, 40 s … capped at 5 min; TimeScale speeds it
// up), "churn" (a pod created every ChurnInterval and removed after
// ChurnLifetime) or "script" (ScriptFile) on the runtime clock.
//
// # Script language
//
// A script is run by RunScript, RunScriptFile or ParseScript + Script.Run.
// One command per line; "#" starts a comment; blank lines are ignored;
// words are separated by spaces; durations use Go syntax (500ms, 2s, 1h).
// A line may start with "at DURATION": the command then waits until that
// long after the script started (runtime clock; at once if already past).
// Other lines run right after the previous one. POD is a pod name, CTR a
// container name; a pod or container created by the script is found by its
// script name, otherwise the newest sandbox with that metadata name (so a
// script can act on a scenario's pods), or the newest container with that
// name in the pod.
//
//	run-pod POD [uid=UID] [ns=NS] [attempt=N] [id=ID] [ip=IP]   RunPodSandbox (uid default "uid-POD")
//	stop-pod POD                                                StopPodSandbox
//	remove-pod POD                                              RemovePodSandbox
//	create POD/CTR [attempt=N] [id=ID] [image=IMAGE]            CreateContainer
//	start POD/CTR                                               StartContainer
//	stop POD/CTR [exit=N]                                       StopContainer (exit default 0)
//	remove POD/CTR                                              RemoveContainer
//	set POD/CTR state=created|running|exited|unknown [exit=N]   SetContainerState (no event)
//	set-pod POD state=ready|notready                            SetSandboxState (no event)
//	set-ip POD IP                                               SetSandboxIP (no event)
//	sleep DURATION                                              wait on the runtime clock
//	log TEXT...                                                 log TEXT
//	fault drop N                                                DropNext(N)
//	fault break                                                 BreakStreams()
//	fault refuse DURATION                                       Refuse(DURATION)
//	fault delay DURATION                                        Faults.Delay (0 clears)
//	fault future DURATION                                       Faults.FutureTimestamps (0 clears)
//	fault duplicate|reorder|nil-status|fail-status on|off       Faults.Duplicate, Reorder, NilSandboxStatus, FailSandboxStatus
//	fault unimplemented|events-disabled on|off                  Faults.Unimplemented, EventsDisabled
//	fault timestamp-without-statuses|seconds on|off             Faults.TimestampWithoutStatuses, SecondsTimestamps
//	fault fail-rpc METHOD CODE|off                              Faults.FailRPC[METHOD] = CODE (e.g. Unavailable)
//	fault flush                                                 Flush()
//	fault clear                                                 SetFaults(Faults{})
//
// Example (§7 scenarios 9 and 10 with the reference's IDs):
//
//	at 0s  run-pod web uid=p1 id=s1
//	at 1s  create web/c1 id=c1
//	at 2s  start web/c1
//	at 10s stop web/c1 exit=137
//	at 11s remove web/c1
//
// Errors name the line: "line 3 (strat web/c1): unknown command \"strat\""
// (a *ScriptError, at parse time for syntax, at run time for state errors
// such as an unknown pod).
//
// # Reproducing the PLEG acceptance scenarios
//
// How each scenario of the reference's §7 is set up (the PLEG side
// observes the outcome):
//
//	1-3   state API (SetContainerState for UNKNOWN; C3 UNKNOWN, C4 CREATED)
//	4     no runtime change; relist successfully, then not (FailRPC)
//	5     FailRPC{"ListPodSandbox": codes.Unknown}
//	6     FailSandboxStatus, then cleared
//	7     any six transitions
//	8-11  a healthy stream; RunPodSandbox, CreateContainer, StartContainer,
//	      StopContainer(137), RemoveContainer, RemovePodSandbox
//	12    NilSandboxStatus
//	13    RunPodSandbox of a new UID after a relist
//	14    SetSandboxIP, StopPodSandbox (clears the IP), SetSandboxIP .6
//	15    Reorder (or Delay on one event)
//	16    Duplicate
//	17    SetRPCHook: hold the PodSandboxStatus response (StatusWithContainers)
//	      while the container stops and its event is delivered
//	18    FutureTimestamps(1h) on one event, then cleared; SecondsTimestamps
//	19    TimestampWithoutStatuses
//	20    fake clock steps between events
//	21    BreakStreams after two events; DropNext or BufferDrop to lose the
//	      gap's events (BufferBlock replays them, like containerd 2.x)
//	22    SetContainerState (no event)
//	23    Unimplemented
//	24    EventsDisabled
//	25    BreakStreams/Close; Stats().Subscribers shows open streams
package fakecri
