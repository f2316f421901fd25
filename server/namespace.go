package server

import (
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// namespacePathPrefix is the path of the core group's namespaces.
const namespacePathPrefix = "/api/v1/namespaces/"

// serveNamespace answers GET /api/v1/namespaces/NAME, reporting whether
// the request was that. eventsd keeps no namespaces: events may be
// written to any namespace whose name is valid, so every such namespace
// exists and is Active, and the answer is the minimal Namespace
// kube-apiserver would show for one (its name, the
// kubernetes.io/metadata.name label it sets on every namespace, its
// finalizer and phase). A name no namespace can have gets kube-apiserver's
// 404 `namespaces "NAME" not found`.
//
// kubectl needs it after a 404 for an object in a namespace other than
// default: it asks for the namespace and, unless that is a 404 too, shows
// the object's own error (`events "x" not found`) rather than the
// namespace's. The request is authenticated and authorized as every
// other is, as a get of the namespace; a refusal also leaves kubectl
// showing the object's error.
func serveNamespace(w http.ResponseWriter, r *http.Request) bool {
	name, ok := strings.CutPrefix(r.URL.Path, namespacePathPrefix)
	if !ok || name == "" || strings.Contains(name, "/") || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	o, ok := negotiate(r.Header.Get("Accept"))
	switch {
	case !ok:
		writeStatus(w, notAcceptable())
		return true
	case o.kind == outTable || o.kind == outPartial:
		// Tables and metadata are produced for events only; a plain
		// object is what every client that asks for them also accepts.
		o = output{kind: outJSON}
	}
	if len(validation.IsDNS1123Label(name)) > 0 {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name))
		return true
	}
	writeObject(w, o, http.StatusOK, &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	})
	return true
}
