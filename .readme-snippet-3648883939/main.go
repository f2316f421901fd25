package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientevents "k8s.io/client-go/tools/events" // the sink stays client-go's

	"github.com/kubevents/kubevents/events" // was k8s.io/client-go/tools/events
)

func main() {
	ctx := context.Background()
	clientset := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:8080"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", UID: "uid-web-1"}}

	broadcaster := events.NewBroadcaster(&clientevents.EventSinkImpl{Interface: clientset.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		panic(err)
	}
	defer broadcaster.Shutdown() // writes every pending series count
	recorder := broadcaster.NewRecorder(scheme.Scheme, "my-controller")
	recorder.Eventf(pod, nil, corev1.EventTypeWarning, "BackOff", "Restart", "Back-off restarting %s", "web")
}
