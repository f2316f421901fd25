package fakecri

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Names of the built-in scenarios (RunScenario).
const (
	// ScenarioSteady starts Pods pods of Containers running containers
	// each, then changes nothing.
	ScenarioSteady = "steady"
	// ScenarioCrashloop runs one pod "crash" whose container "app" exits
	// with ExitCode after CrashAfter and is recreated with attempt+1 after a
	// kubelet-like back-off: InitialBackOff, doubled each restart, capped at
	// MaxBackOff.
	ScenarioCrashloop = "crashloop"
	// ScenarioChurn creates a pod of Containers running containers every
	// ChurnInterval and removes each pod ChurnLifetime after it was created.
	ScenarioChurn = "churn"
	// ScenarioScript runs the script in ScriptFile (see the package doc).
	ScenarioScript = "script"
)

// Scenarios returns the names RunScenario accepts.
func Scenarios() []string {
	return []string{ScenarioSteady, ScenarioCrashloop, ScenarioChurn, ScenarioScript}
}

// ScenarioOptions configure RunScenario. The zero value is valid.
type ScenarioOptions struct {
	// Pods is the number of pods of ScenarioSteady. Default 10.
	Pods int
	// Containers is the number of containers per pod of ScenarioSteady
	// (default 2) and ScenarioChurn (default 1).
	Containers int
	// Namespace of the pods. Default "default".
	Namespace string
	// TimeScale divides every scenario duration (CrashAfter, back-offs,
	// ChurnInterval, ChurnLifetime): 10 runs ten times faster on the
	// runtime clock. Default 1.
	TimeScale float64
	// CrashAfter is how long each ScenarioCrashloop attempt runs. Default 5s.
	CrashAfter time.Duration
	// ExitCode is the exit code of ScenarioCrashloop's attempts. Default 1.
	ExitCode int32
	// InitialBackOff is ScenarioCrashloop's first restart delay, doubled
	// at each restart. Default 10s (the kubelet's).
	InitialBackOff time.Duration
	// MaxBackOff caps ScenarioCrashloop's restart delay. Default 5m (the
	// kubelet's).
	MaxBackOff time.Duration
	// ChurnInterval is the time between two ScenarioChurn pod creations.
	// Default 1s.
	ChurnInterval time.Duration
	// ChurnLifetime is how long a ScenarioChurn pod lives. Default 10s.
	ChurnLifetime time.Duration
	// ScriptFile is the script of ScenarioScript.
	ScriptFile string
}

func (o ScenarioOptions) withDefaults(name string) (ScenarioOptions, error) {
	if o.Pods < 0 || o.Containers < 0 || o.TimeScale < 0 || o.CrashAfter < 0 || o.InitialBackOff < 0 ||
		o.MaxBackOff < 0 || o.ChurnInterval < 0 || o.ChurnLifetime < 0 {
		return o, errors.New("negative scenario option")
	}
	if o.Pods == 0 {
		o.Pods = 10
	}
	if o.Containers == 0 {
		o.Containers = 2
		if name == ScenarioChurn {
			o.Containers = 1
		}
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.CrashAfter == 0 {
		o.CrashAfter = 5 * time.Second
	}
	if o.ExitCode == 0 {
		o.ExitCode = 1
	}
	if o.InitialBackOff == 0 {
		o.InitialBackOff = 10 * time.Second
	}
	if o.MaxBackOff == 0 {
		o.MaxBackOff = 5 * time.Minute
	}
	if o.ChurnInterval == 0 {
		o.ChurnInterval = time.Second
	}
	if o.ChurnLifetime == 0 {
		o.ChurnLifetime = 10 * time.Second
	}
	return o, nil
}

// scaled divides d by the time scale.
func (o ScenarioOptions) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / o.TimeScale)
}

// RunScenario runs a built-in scenario (ScenarioSteady, ScenarioCrashloop,
// ScenarioChurn, ScenarioScript) on the runtime clock until ctx ends, then
// returns nil, leaving the state as it is (ScenarioScript returns when the
// script ends). It returns an error for an unknown name, a bad option or a
// state change that fails (someone removed the scenario's pod). Pods are
// named after the scenario ("steady-0", "crash", "churn-0", ...) with UID
// "uid-" + name. A scenario blocked publishing an event (BufferBlock with a
// subscriber that does not read) notices ctx only once the event is
// delivered; Close unblocks it.
func (r *Runtime) RunScenario(ctx context.Context, name string, opts ScenarioOptions) error {
	o, err := opts.withDefaults(name)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", name, err)
	}
	r.log.Info("scenario starting", "scenario", name)
	defer r.log.Info("scenario ended", "scenario", name)
	switch name {
	case ScenarioSteady:
		err = r.runSteady(ctx, o)
	case ScenarioCrashloop:
		err = r.runCrashloop(ctx, o)
	case ScenarioChurn:
		err = r.runChurn(ctx, o)
	case ScenarioScript:
		if o.ScriptFile == "" {
			return errors.New("scenario script: no script file")
		}
		err = r.RunScriptFile(ctx, o.ScriptFile)
	default:
		return fmt.Errorf("unknown scenario %q (want one of %s)", name, strings.Join(Scenarios(), ", "))
	}
	if err != nil {
		return fmt.Errorf("scenario %s: %w", name, err)
	}
	return nil
}

// sleep waits d on the runtime clock; false if ctx ended first.
func (r *Runtime) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := r.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// startPod runs a sandbox named name with n started containers c0..c<n-1>.
func (r *Runtime) startPod(ns, name string, n int) (string, []string, error) {
	sb, err := r.RunPodSandboxSpec(SandboxSpec{UID: "uid-" + name, Namespace: ns, Name: name})
	if err != nil {
		return "", nil, err
	}
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		id, err := r.CreateContainerSpec(ContainerSpec{SandboxID: sb, Name: "c" + strconv.Itoa(i)})
		if err != nil {
			return sb, ids, err
		}
		ids = append(ids, id)
		if err := r.StartContainer(id); err != nil {
			return sb, ids, err
		}
	}
	return sb, ids, nil
}

func (r *Runtime) runSteady(ctx context.Context, o ScenarioOptions) error {
	for i := 0; i < o.Pods; i++ {
		if ctx.Err() != nil {
			return nil
		}
		if _, _, err := r.startPod(o.Namespace, "steady-"+strconv.Itoa(i), o.Containers); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

func (r *Runtime) runCrashloop(ctx context.Context, o ScenarioOptions) error {
	sb, err := r.RunPodSandboxSpec(SandboxSpec{UID: "uid-crash", Namespace: o.Namespace, Name: "crash"})
	if err != nil {
		return err
	}
	var dead []string // exited attempts, oldest first; the newest is kept, as the kubelet's GC does
	backOff := o.InitialBackOff
	for attempt := uint32(0); ; attempt++ {
		id, err := r.CreateContainerSpec(ContainerSpec{SandboxID: sb, Name: "app", Attempt: attempt})
		if err != nil {
			return err
		}
		if err := r.StartContainer(id); err != nil {
			return err
		}
		for len(dead) > 1 {
			if err := r.RemoveContainer(dead[0]); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			dead = dead[1:]
		}
		if !r.sleep(ctx, o.scaled(o.CrashAfter)) {
			return nil
		}
		if err := r.StopContainer(id, o.ExitCode); err != nil {
			return err
		}
		dead = append(dead, id)
		if !r.sleep(ctx, o.scaled(backOff)) {
			return nil
		}
		backOff = min(2*backOff, o.MaxBackOff)
	}
}

func (r *Runtime) runChurn(ctx context.Context, o ScenarioOptions) error {
	type livePod struct {
		sb   string
		ctrs []string
		born time.Time
	}
	var pods []livePod
	lifetime := o.scaled(o.ChurnLifetime)
	for i := 0; ; i++ {
		now := r.clk.Now()
		for len(pods) > 0 && now.Sub(pods[0].born) >= lifetime {
			if err := r.tearDown(pods[0].sb, pods[0].ctrs); err != nil {
				return err
			}
			pods = pods[1:]
		}
		sb, ctrs, err := r.startPod(o.Namespace, "churn-"+strconv.Itoa(i), o.Containers)
		if err != nil {
			return err
		}
		pods = append(pods, livePod{sb: sb, ctrs: ctrs, born: now})
		if !r.sleep(ctx, o.scaled(o.ChurnInterval)) {
			return nil
		}
	}
}

// tearDown removes a pod the way the kubelet does: stop its containers
// (exit 0), stop the sandbox, remove it (and its containers).
func (r *Runtime) tearDown(sb string, ctrs []string) error {
	for _, c := range ctrs {
		if err := r.StopContainer(c, 0); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if err := r.StopPodSandbox(sb); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if err := r.RemovePodSandbox(sb); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// ScriptError is an error of a script line, at parse or run time.
type ScriptError struct {
	// Line is the 1-based line number.
	Line int
	// Text is the line, comments and surrounding space removed.
	Text string
	// Err is what went wrong.
	Err error
}

// Error implements error.
func (e *ScriptError) Error() string {
	return fmt.Sprintf("line %d (%s): %v", e.Line, e.Text, e.Err)
}

// Unwrap returns Err.
func (e *ScriptError) Unwrap() error { return e.Err }

// Script is a parsed script (see the package doc for the language).
type Script struct {
	steps []step
}

type step struct {
	line  int
	text  string
	at    time.Duration
	hasAt bool
	run   func(ctx context.Context, x *scriptRun) error
}

// scriptRun is one execution of a Script.
type scriptRun struct {
	r     *Runtime
	start time.Time
	pods  map[string]string // script pod name -> sandbox ID
	ctrs  map[string]string // "pod/ctr" -> container ID
}

// ParseScript parses a script, reporting the first bad line as a
// *ScriptError.
func ParseScript(rd io.Reader) (*Script, error) {
	s := &Script{}
	sc := bufio.NewScanner(rd)
	n := 0
	for sc.Scan() {
		n++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		st := step{line: n, text: text}
		if fields[0] == "at" {
			if len(fields) < 3 {
				return nil, &ScriptError{Line: n, Text: text, Err: errors.New(`"at" wants a duration and a command`)}
			}
			d, err := time.ParseDuration(fields[1])
			if err != nil || d < 0 {
				return nil, &ScriptError{Line: n, Text: text, Err: fmt.Errorf("bad time %q", fields[1])}
			}
			st.at, st.hasAt = d, true
			fields = fields[2:]
		}
		run, err := parseCommand(fields)
		if err != nil {
			return nil, &ScriptError{Line: n, Text: text, Err: err}
		}
		st.run = run
		s.steps = append(s.steps, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading script: %w", err)
	}
	return s, nil
}

// RunScript parses and runs a script on the runtime (see the package doc).
// It returns when the script ends, or with nil when ctx ends first; a
// failing line stops it with a *ScriptError.
func (r *Runtime) RunScript(ctx context.Context, rd io.Reader) error {
	s, err := ParseScript(rd)
	if err != nil {
		return err
	}
	return s.Run(ctx, r)
}

// RunScriptFile runs the script in the file at path (see RunScript).
func (r *Runtime) RunScriptFile(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening script: %w", err)
	}
	defer f.Close()
	s, err := ParseScript(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := s.Run(ctx, r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Run runs the script on r; see RunScript.
func (s *Script) Run(ctx context.Context, r *Runtime) error {
	x := &scriptRun{r: r, start: r.clk.Now(), pods: map[string]string{}, ctrs: map[string]string{}}
	for _, st := range s.steps {
		if st.hasAt {
			if !r.sleep(ctx, x.start.Add(st.at).Sub(r.clk.Now())) {
				return nil
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		r.log.Debug("script", "line", st.line, "command", st.text)
		if err := st.run(ctx, x); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return &ScriptError{Line: st.line, Text: st.text, Err: err}
		}
	}
	return nil
}

// pod resolves a script pod name: one run by the script, else the newest
// sandbox with that metadata name.
func (x *scriptRun) pod(name string) (string, error) {
	if id, ok := x.pods[name]; ok {
		return id, nil
	}
	if id := x.r.findSandbox(name); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("no pod %q", name)
}

// ctr resolves "pod/ctr": the container created by the script, else the
// newest container with that name in the pod.
func (x *scriptRun) ctr(ref string) (string, error) {
	if id, ok := x.ctrs[ref]; ok {
		return id, nil
	}
	podName, name, _ := strings.Cut(ref, "/")
	sb, err := x.pod(podName)
	if err != nil {
		return "", err
	}
	if id := x.r.findContainer(sb, name); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("no container %q", ref)
}

// onPod is a step that resolves the pod name (see scriptRun.pod) when it
// runs and applies f to the sandbox ID.
func onPod(name string, f func(x *scriptRun, sb string) error) runFunc {
	return func(_ context.Context, x *scriptRun) error {
		sb, err := x.pod(name)
		if err != nil {
			return err
		}
		return f(x, sb)
	}
}

// onContainer is a step that resolves "pod/ctr" (see scriptRun.ctr) when
// it runs and applies f to the container ID.
func onContainer(ref string, f func(x *scriptRun, id string) error) runFunc {
	return func(_ context.Context, x *scriptRun) error {
		id, err := x.ctr(ref)
		if err != nil {
			return err
		}
		return f(x, id)
	}
}

// args splits fields into positional arguments and key=value options,
// checking the option keys against allowed and the positional count.
func args(fields []string, positional int, allowed ...string) ([]string, map[string]string, error) {
	var pos []string
	kv := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			pos = append(pos, f)
			continue
		}
		found := false
		for _, a := range allowed {
			found = found || a == k
		}
		if !found {
			return nil, nil, fmt.Errorf("unknown option %q", k)
		}
		kv[k] = v
	}
	if len(pos) != positional {
		return nil, nil, fmt.Errorf("want %d argument(s), got %d", positional, len(pos))
	}
	return pos, kv, nil
}

func parseUint32(kv map[string]string, key string) (uint32, error) {
	v, ok := kv[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q: %w", key, v, err)
	}
	return uint32(n), nil
}

func parseInt32(kv map[string]string, key string) (int32, error) {
	v, ok := kv[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad %s %q: %w", key, v, err)
	}
	return int32(n), nil
}

func checkRef(ref string) error {
	p, c, ok := strings.Cut(ref, "/")
	if !ok || p == "" || c == "" || strings.Contains(c, "/") {
		return fmt.Errorf("want POD/CONTAINER, got %q", ref)
	}
	return nil
}

var containerStates = map[string]runtimeapi.ContainerState{
	"created": runtimeapi.ContainerState_CONTAINER_CREATED,
	"running": runtimeapi.ContainerState_CONTAINER_RUNNING,
	"exited":  runtimeapi.ContainerState_CONTAINER_EXITED,
	"unknown": runtimeapi.ContainerState_CONTAINER_UNKNOWN,
}

var sandboxStates = map[string]runtimeapi.PodSandboxState{
	"ready":    runtimeapi.PodSandboxState_SANDBOX_READY,
	"notready": runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
}

// parseCode parses a gRPC code name such as "Unavailable" (any case).
func parseCode(s string) (codes.Code, error) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.EqualFold(c.String(), s) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown gRPC code %q", s)
}

func parseOnOff(s string) (bool, error) {
	switch s {
	case "on", "true":
		return true, nil
	case "off", "false":
		return false, nil
	}
	return false, fmt.Errorf("want on or off, got %q", s)
}

type runFunc = func(ctx context.Context, x *scriptRun) error

// parseCommand parses one command into the function that runs it.
func parseCommand(fields []string) (runFunc, error) {
	cmd, rest := fields[0], fields[1:]
	switch cmd {
	case "run-pod":
		pos, kv, err := args(rest, 1, "uid", "ns", "attempt", "id", "ip")
		if err != nil {
			return nil, err
		}
		attempt, err := parseUint32(kv, "attempt")
		if err != nil {
			return nil, err
		}
		name := pos[0]
		spec := SandboxSpec{ID: kv["id"], UID: kv["uid"], Namespace: kv["ns"], Name: name, Attempt: attempt, IP: kv["ip"]}
		if spec.UID == "" {
			spec.UID = "uid-" + name
		}
		return func(_ context.Context, x *scriptRun) error {
			id, err := x.r.RunPodSandboxSpec(spec)
			if err != nil {
				return err
			}
			x.pods[name] = id
			return nil
		}, nil
	case "stop-pod", "remove-pod":
		pos, _, err := args(rest, 1)
		if err != nil {
			return nil, err
		}
		return onPod(pos[0], func(x *scriptRun, sb string) error {
			if cmd == "stop-pod" {
				return x.r.StopPodSandbox(sb)
			}
			return x.r.RemovePodSandbox(sb)
		}), nil
	case "set-pod":
		pos, kv, err := args(rest, 1, "state")
		if err != nil {
			return nil, err
		}
		state, ok := sandboxStates[kv["state"]]
		if !ok {
			return nil, fmt.Errorf("want state=ready or state=notready, got %q", kv["state"])
		}
		return onPod(pos[0], func(x *scriptRun, sb string) error {
			return x.r.SetSandboxState(sb, state)
		}), nil
	case "set-ip":
		pos, _, err := args(rest, 2)
		if err != nil {
			return nil, err
		}
		return onPod(pos[0], func(x *scriptRun, sb string) error {
			return x.r.SetSandboxIP(sb, pos[1])
		}), nil
	case "create":
		pos, kv, err := args(rest, 1, "attempt", "id", "image")
		if err != nil {
			return nil, err
		}
		if err := checkRef(pos[0]); err != nil {
			return nil, err
		}
		attempt, err := parseUint32(kv, "attempt")
		if err != nil {
			return nil, err
		}
		ref := pos[0]
		podName, name, _ := strings.Cut(ref, "/")
		return onPod(podName, func(x *scriptRun, sb string) error {
			id, err := x.r.CreateContainerSpec(ContainerSpec{ID: kv["id"], SandboxID: sb, Name: name, Attempt: attempt, Image: kv["image"]})
			if err != nil {
				return err
			}
			x.ctrs[ref] = id
			return nil
		}), nil
	case "start", "remove":
		pos, _, err := args(rest, 1)
		if err != nil {
			return nil, err
		}
		if err := checkRef(pos[0]); err != nil {
			return nil, err
		}
		return onContainer(pos[0], func(x *scriptRun, id string) error {
			if cmd == "start" {
				return x.r.StartContainer(id)
			}
			return x.r.RemoveContainer(id)
		}), nil
	case "stop":
		pos, kv, err := args(rest, 1, "exit")
		if err != nil {
			return nil, err
		}
		if err := checkRef(pos[0]); err != nil {
			return nil, err
		}
		code, err := parseInt32(kv, "exit")
		if err != nil {
			return nil, err
		}
		return onContainer(pos[0], func(x *scriptRun, id string) error {
			return x.r.StopContainer(id, code)
		}), nil
	case "set":
		pos, kv, err := args(rest, 1, "state", "exit")
		if err != nil {
			return nil, err
		}
		if err := checkRef(pos[0]); err != nil {
			return nil, err
		}
		state, ok := containerStates[kv["state"]]
		if !ok {
			return nil, fmt.Errorf("want state=created|running|exited|unknown, got %q", kv["state"])
		}
		code, err := parseInt32(kv, "exit")
		if err != nil {
			return nil, err
		}
		return onContainer(pos[0], func(x *scriptRun, id string) error {
			return x.r.SetContainerState(id, state, code)
		}), nil
	case "sleep":
		pos, _, err := args(rest, 1)
		if err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(pos[0])
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad duration %q", pos[0])
		}
		return func(ctx context.Context, x *scriptRun) error {
			x.r.sleep(ctx, d)
			return nil
		}, nil
	case "log":
		msg := strings.Join(rest, " ")
		return func(_ context.Context, x *scriptRun) error {
			x.r.log.Info("script: " + msg)
			return nil
		}, nil
	case "fault":
		if len(rest) == 0 {
			return nil, errors.New("fault wants a name")
		}
		return parseFault(rest[0], rest[1:])
	}
	return nil, fmt.Errorf("unknown command %q", cmd)
}

// parseFault parses "fault NAME ARGS...".
func parseFault(name string, rest []string) (runFunc, error) {
	want := func(n int) error {
		if len(rest) != n {
			return fmt.Errorf("fault %s wants %d argument(s), got %d", name, n, len(rest))
		}
		return nil
	}
	toggles := map[string]func(*Faults, bool){
		"duplicate":                  func(f *Faults, v bool) { f.Duplicate = v },
		"reorder":                    func(f *Faults, v bool) { f.Reorder = v },
		"nil-status":                 func(f *Faults, v bool) { f.NilSandboxStatus = v },
		"fail-status":                func(f *Faults, v bool) { f.FailSandboxStatus = v },
		"unimplemented":              func(f *Faults, v bool) { f.Unimplemented = v },
		"events-disabled":            func(f *Faults, v bool) { f.EventsDisabled = v },
		"timestamp-without-statuses": func(f *Faults, v bool) { f.TimestampWithoutStatuses = v },
		"seconds":                    func(f *Faults, v bool) { f.SecondsTimestamps = v },
	}
	if set, ok := toggles[name]; ok {
		if err := want(1); err != nil {
			return nil, err
		}
		v, err := parseOnOff(rest[0])
		if err != nil {
			return nil, err
		}
		return func(_ context.Context, x *scriptRun) error {
			x.r.UpdateFaults(func(f *Faults) { set(f, v) })
			return nil
		}, nil
	}
	switch name {
	case "drop":
		if err := want(1); err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad count %q", rest[0])
		}
		return func(_ context.Context, x *scriptRun) error { x.r.DropNext(n); return nil }, nil
	case "break", "flush", "clear":
		if err := want(0); err != nil {
			return nil, err
		}
		return func(_ context.Context, x *scriptRun) error {
			switch name {
			case "break":
				x.r.BreakStreams()
			case "flush":
				x.r.Flush()
			default:
				x.r.SetFaults(Faults{})
			}
			return nil
		}, nil
	case "refuse", "delay", "future":
		if err := want(1); err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(rest[0])
		if err != nil || d < 0 {
			return nil, fmt.Errorf("bad duration %q", rest[0])
		}
		return func(_ context.Context, x *scriptRun) error {
			switch name {
			case "refuse":
				x.r.Refuse(d)
			case "delay":
				x.r.UpdateFaults(func(f *Faults) { f.Delay = d })
			default:
				x.r.UpdateFaults(func(f *Faults) { f.FutureTimestamps = d })
			}
			return nil
		}, nil
	case "fail-rpc":
		if err := want(2); err != nil {
			return nil, err
		}
		method := rest[0]
		off := rest[1] == "off"
		var code codes.Code
		if !off {
			c, err := parseCode(rest[1])
			if err != nil {
				return nil, err
			}
			code = c
		}
		return func(_ context.Context, x *scriptRun) error {
			x.r.UpdateFaults(func(f *Faults) {
				if off {
					delete(f.FailRPC, method)
					return
				}
				if f.FailRPC == nil {
					f.FailRPC = map[string]codes.Code{}
				}
				f.FailRPC[method] = code
			})
			return nil
		}, nil
	}
	return nil, fmt.Errorf("unknown fault %q", name)
}
