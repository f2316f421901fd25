package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	"github.com/kubevents/kubevents/storage/clusterview"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxBodyBytes is kube-apiserver's request body limit (3 MiB).
const maxBodyBytes = 3 << 20

// statusError renders err as a Kubernetes Status error. Errors that are
// already API status errors pass through; storage sentinels map to their
// HTTP meaning; anything else is a 500 whose message names the cause.
func statusError(err error, rr resourceRequest, name string) *apierrors.StatusError {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se
	}
	gr := rr.version.GroupResource()
	var ce *storage.ContinueExpiredError
	switch {
	case errors.As(err, &ce):
		se := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
		se.ErrStatus.ListMeta.Continue = ce.Inconsistent
		return se
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(registryOptimisticLockMsg))
	case errors.Is(err, storage.ErrCompacted):
		return apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
	case errors.Is(err, storage.ErrInvalidContinue):
		return apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	case errors.Is(err, clusterview.ErrAmbiguous):
		return apierrors.NewConflict(gr, name, fmt.Errorf("%w: get it from one cluster, at %sNAME/", err, ClustersPathPrefix))
	case errors.Is(err, clusterview.ErrInvalidNamespace):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, clusterview.ErrFleetReadOnly):
		return newStatus(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fleetReadOnly)
	case errors.Is(err, storage.ErrClosed):
		return apierrors.NewServiceUnavailable("the server is shutting down")
	case errors.Is(err, storage.ErrUnreachable):
		return storageUnavailable(err)
	case errors.Is(err, storage.ErrUnavailable):
		return insufficientStorage(err)
	}
	var uf *eventapi.UnsupportedFieldError
	if errors.As(err, &uf) {
		return apierrors.NewBadRequest(uf.Error())
	}
	return apierrors.NewInternalError(err)
}

// insufficientStorage is the answer to a write the store cannot make
// durable (a full disk under pebble; etcd's database over its quota, its
// NOSPACE alarm raised): 507 Insufficient Storage, whose message says why
// (the store's error names its data directory and "no space left on
// device", or etcd's endpoints, "database space exceeded" and etcd's
// remedy). Nothing of the write was applied; clients may retry later.
func insufficientStorage(err error) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInsufficientStorage,
		Reason:  metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("the event store cannot write: %v", err),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Message: err.Error()}}},
	}}
}

// storageUnavailableRetryAfterSeconds is the retry hint of
// storageUnavailable: kube-apiserver's for unreachable storage
// (k8s.io/apiserver's storage errors give NewServerTimeout(..., 2)).
const storageUnavailableRetryAfterSeconds = 2

// storageUnavailable is the answer to a request the store could not
// serve because its backend (etcd) is unreachable, has no quorum or did
// not answer within the store's request timeout: 503 Service Unavailable
// with Retry-After, whose message says the storage is unavailable and
// why (the store's error names etcd's endpoints). client-go retries
// requests that get a 5xx with Retry-After by itself.
//
// kube-apiserver itself, with etcd down, mostly holds the request until
// its own request timeout and then answers 504 Timeout without a retry
// hint; a prompt 503 that says why is what its filters answer for a
// server that cannot serve now.
func storageUnavailable(err error) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusServiceUnavailable,
		Reason:  metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("the event storage is unavailable, please try again later: %v", err),
		Details: &metav1.StatusDetails{
			Causes:            []metav1.StatusCause{{Message: err.Error()}},
			RetryAfterSeconds: storageUnavailableRetryAfterSeconds,
		},
	}}
}

// registryOptimisticLockMsg is kube-apiserver's conflict message.
const registryOptimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"

func invalid(name string, errs field.ErrorList) *apierrors.StatusError {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, name, errs)
}

// tooLargeResourceVersion is kube-apiserver's answer to a list at a
// revision the store has not reached: 504, retry after a second.
func tooLargeResourceVersion(want, current int64) *apierrors.StatusError {
	se := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, current), 1)
	se.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return se
}

// writeStatus writes a Status object with its code, in protobuf when the
// request prefers it (as kube-apiserver answers client-go's typed
// clients), else as JSON.
func writeStatus(w http.ResponseWriter, se *apierrors.StatusError) {
	st := se.ErrStatus
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	ct := "application/json"
	var (
		body []byte
		err  error
	)
	if statusOutputOf(w).isProtobuf() {
		ct = protobufMediaType
		body, err = protobufEnvelope(&st)
	} else {
		body, err = json.Marshal(&st)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache, private")
	if d := st.Details; d != nil && d.RetryAfterSeconds > 0 {
		h.Set("Retry-After", fmt.Sprint(d.RetryAfterSeconds))
	}
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(body)
}

func notFoundPath() *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{}, Message: "the server could not find the requested resource",
	}}
}

func methodNotAllowed(method string) *apierrors.StatusError {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "events"}, method)
}

// newStatus builds a failure Status with an exact message, for codes
// apierrors has no constructor for.
func newStatus(code int32, reason metav1.StatusReason, msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}
