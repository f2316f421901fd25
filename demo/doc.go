// Package demo is the story `eventsd --demo` tells: the events a small
// cluster's components would have recorded over the last half hour, as of
// the moment the demo starts, and the parts of it that go on while the
// demo runs, so that the web timeline, evctl and kubectl show something
// true, recent and alive in a new user's first minute.
//
// The story, in namespace shop and batch and on two Nodes:
//   - A rollout that stalls: Deployment shop/web scaled up its old
//     ReplicaSet web-5d8c7b9f4 to three healthy Pods half an hour ago;
//     twelve minutes ago a new ReplicaSet web-7f6d9c8b5 got one Pod,
//     web-7f6d9c8b5-xk2lp, whose container exits at once: its BackOff
//     series goes on counting, and it is restarted every few minutes,
//     while the demo runs.
//   - An OOM kill: Pod shop/worker-0's container is killed by the kernel
//     on Node node-1 (node-problem-detector's OOMKilling) and restarted.
//   - A Pod that cannot be scheduled, then fits: batch/report-28741530-qz7kd
//     (of CronJob batch/report) fails to schedule five times for want of
//     memory, until Node node-2 is back.
//   - A Node that goes NotReady and comes back: node-2.
//
// Every event is written the way the component that stands for it writes
// its own: the kubelet, the controllers and node-problem-detector through
// core/v1 (with client-go's legacy count and timestamps), the scheduler
// through events.k8s.io/v1 (with an event series). The story goes through
// the API like any client's writes, so that it is stored, indexed,
// watched, folded and exported as real events are.
package demo
