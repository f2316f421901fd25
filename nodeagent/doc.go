// Package nodeagent turns a PLEG's pod lifecycle events into Kubernetes
// Events about pods, as a kubelet would tell them: a container started, a
// container exited (with its exit code), and BackOff while a container
// keeps failing. Recorded through the project's events recorder, the
// repeats of a crashlooping container become one event series each
// instead of a flood.
package nodeagent
