package server

import (
	"context"
	"net/http"

	"github.com/kubevents/kubevents/admission/eventratelimit"
	"github.com/kubevents/kubevents/eventapi"
	"github.com/kubevents/kubevents/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// admitRate applies the event rate limits, if configured, to a write of ev
// that is about to be stored (dry runs are not limited, as upstream's). A
// create may be admitted by the novelty rule. On refusal it answers 429
// with a Retry-After and returns false.
func (s *Server) admitRate(w http.ResponseWriter, r *http.Request, rr resourceRequest, ev *corev1.Event, create bool) bool {
	l := s.cfg.EventRateLimit
	if l == nil {
		return true
	}
	o := ev.InvolvedObject
	req := &eventratelimit.Request{
		Namespace: rr.namespace,
		User:      userName(r.Context()),
		Source:    eventratelimit.Source{Controller: ev.Source.Component, Instance: ev.Source.Host},
		Object:    eventratelimit.Object{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: string(o.UID), APIVersion: o.APIVersion},
	}
	if rr.version.Shape() == eventapi.EventsV1 {
		req.Source = eventratelimit.Source{Controller: ev.ReportingController, Instance: ev.ReportingInstance}
	}
	if create {
		req.Novel = func(ctx context.Context) (bool, error) { return s.firstForObjectAndReason(ctx, ev) }
	}
	d := l.Admit(r.Context(), req)
	if d.Novel {
		s.metrics.rateLimitNovel.Inc()
	}
	if d.Allowed {
		return true
	}
	for _, ref := range d.Refusals {
		s.metrics.rateLimited.WithLabelValues(string(ref.Type)).Inc()
	}
	s.rateLimitLog.Warn("event write refused: rate limit reached", "verb", rr.verb, "group", rr.version.Group(),
		"namespace", rr.namespace, "user", req.User, "reason", d.Message(), "retryAfterSeconds", d.RetryAfterSeconds())
	writeStatus(w, apierrors.NewTooManyRequests("Too many requests: "+d.Message(), int(d.RetryAfterSeconds())))
	return false
}

// firstForObjectAndReason reports whether no event about ev's involved
// object with ev's reason is stored: an indexed list (by the object's uid,
// else its name) that stops at the first match.
func (s *Server) firstForObjectAndReason(ctx context.Context, ev *corev1.Event) (bool, error) {
	o := ev.InvolvedObject
	if o.UID == "" && o.Name == "" {
		// Not an object's event: no index narrows the lookup, which would
		// scan the namespace, and there is no object to be new about.
		return false, nil
	}
	fs := eventapi.FieldSelector{{Field: eventapi.FieldReason, Value: ev.Reason}}
	if o.UID != "" {
		fs = append(fs, eventapi.Requirement{Field: eventapi.FieldInvolvedUID, Value: string(o.UID)})
	} else {
		fs = append(fs,
			eventapi.Requirement{Field: eventapi.FieldInvolvedName, Value: o.Name},
			eventapi.Requirement{Field: eventapi.FieldInvolvedKind, Value: o.Kind},
			eventapi.Requirement{Field: eventapi.FieldInvolvedNamespace, Value: o.Namespace})
	}
	res, err := s.store(ctx).List(ctx, storage.ListOptions{Selector: storage.Selector{Namespace: ev.Namespace, Fields: fs}, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(res.Items) == 0, nil
}

// userName is the name of the request's authenticated user, or
// kube-apiserver's anonymous user without authentication.
func userName(ctx context.Context) string {
	if u, ok := request.UserFrom(ctx); ok {
		return u.GetName()
	}
	return user.Anonymous
}
