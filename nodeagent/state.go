package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// State is what an agent knows that a successor needs to record every
// transition once across a restart (KEP-3386's recovery): the time its
// watch began, what it recorded of each container still in the runtime,
// and each pod's failures. A successor resumed from it records what
// happened while no agent ran (a container that completed meanwhile)
// and nothing its predecessor recorded.
type State struct {
	// Since is when the first agent of the chain began watching.
	Since time.Time `json:"since"`
	// Containers are the containers the agent knew, by ID.
	Containers map[string]ContainerState `json:"containers,omitempty"`
	// Sandboxes are the sandbox IDs seen.
	Sandboxes []string `json:"sandboxes,omitempty"`
	// Failures counts each pod's failed exits by container name.
	Failures map[types.UID]map[string]int `json:"failures,omitempty"`
	// SeriesCodes is the exit code of each pod's containers' Exited
	// series, by container name.
	SeriesCodes map[types.UID]map[string]int32 `json:"seriesCodes,omitempty"`
}

// ContainerState is what an agent recorded of one container.
type ContainerState struct {
	Pod       types.UID `json:"pod"`
	Namespace string    `json:"namespace"`
	PodName   string    `json:"podName"`
	Name      string    `json:"name"`
	Started   bool      `json:"started,omitempty"`
	Died      bool      `json:"died,omitempty"`
}

// State returns the agent's state; call it once Run has returned.
func (a *Agent) State() *State {
	s := &State{Since: a.since, Containers: map[string]ContainerState{}, Failures: a.failures, SeriesCodes: a.seriesCodes}
	for id, c := range a.containers {
		s.Containers[id] = ContainerState{Pod: c.pod, Namespace: c.namespace, PodName: c.podName, Name: c.name,
			Started: c.started, Died: c.died}
	}
	for id := range a.sandboxes {
		s.Sandboxes = append(s.Sandboxes, id)
	}
	return s
}

// resume takes over a predecessor's state.
func (a *Agent) resume(s *State) {
	if !s.Since.IsZero() {
		a.since = s.Since
	}
	for id, c := range s.Containers {
		a.containers[id] = &containerInfo{pod: c.Pod, namespace: c.Namespace, podName: c.PodName, name: c.Name,
			started: c.Started, died: c.Died, resumed: true}
	}
	for _, id := range s.Sandboxes {
		a.sandboxes[id] = struct{}{}
	}
	for uid, byName := range s.Failures {
		a.failures[uid] = byName
	}
	for uid, byName := range s.SeriesCodes {
		a.seriesCodes[uid] = byName
	}
}

// takeState reads the state a predecessor left in path and removes the
// file, so that an agent that dies without writing its own is succeeded
// by one that starts afresh (missing what happened meanwhile) rather than
// by one that records again what was recorded since that state was
// written. No file is no state (nil, nil).
func takeState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	return &s, nil
}

// writeState writes s to path atomically (a rename).
func writeState(path string, s *State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}
