package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Outcomes counted by eventsd_unauthorized_requests_total and
// eventsd_forbidden_requests_total.
const (
	// outcomeRejected: no credentials, or credentials no authenticator
	// accepts (without an error); or no authorizer allowed the request.
	outcomeRejected = "rejected"
	// outcomeError: an authenticator or authorizer returned an error (a
	// webhook down, or a TokenReview reporting one), so the request could
	// not be authenticated or authorized.
	outcomeError = "error"
)

// authLogs rate-limit the log lines of refused requests, one limiter per
// condition, so that a storm of one (clients without tokens) does not
// hide another (a webhook down).
type authLogs struct {
	unauthenticated, authnError, forbidden, authzError *logLimiter
}

func newAuthLogs(cfg Config) authLogs {
	l := func() *logLimiter { return newLogLimiter(cfg.Clock, cfg.Logger, authLogInterval) }
	return authLogs{unauthenticated: l(), authnError: l(), forbidden: l(), authzError: l()}
}

// authLogInterval is the least time between two log lines of one kind of
// refusal; the count of those in between is logged with the next.
const authLogInterval = 10 * time.Second

// newRequestInfoFactory turns requests into kube-apiserver's request
// info: the verb, API group, resource, namespace and name authorizers see.
func newRequestInfoFactory() *request.RequestInfoFactory {
	return &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	}
}

// anonymousUser is who requests are when eventsd has no authenticator:
// kube-apiserver's anonymous user.
func anonymousUser() user.Info {
	return &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
}

// authenticate returns r with its user in the context, as
// request.UserFrom reads it; without an authenticator the user is
// system:anonymous. frontProxy reports a request that Config.FrontProxy
// authenticated. A request that does not authenticate is answered with
// 401 and ok is false.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (_ *http.Request, _ user.Info, frontProxy, ok bool) {
	u := s.anonymous
	var proxyErr error
	if fp := s.cfg.FrontProxy; fp != nil {
		resp, ok, err := fp.AuthenticateRequest(r)
		if ok {
			return r.WithContext(request.WithUser(r.Context(), resp.User)), resp.User, true, true
		}
		// A client certificate the front proxy's CA does not verify (or
		// whose name it does not allow) may be a client's own: the other
		// authenticators decide, and the error is reported only if none
		// accepts the request, as in kube-apiserver's union.
		proxyErr = err
	}
	if a := s.cfg.Authenticator; a != nil || s.cfg.FrontProxy != nil {
		var resp *authenticator.Response
		var ok bool
		var err error
		if a != nil {
			resp, ok, err = a.AuthenticateRequest(r)
		}
		if !ok && proxyErr != nil {
			err = errors.Join(proxyErr, err)
		}
		if err != nil || !ok {
			outcome := outcomeRejected
			if err != nil {
				// An authenticator failed (a TokenReview webhook down,
				// or reporting an error): log why.
				outcome = outcomeError
				s.authLogs.authnError.Warn("unable to authenticate the request", "method", r.Method, "path", r.URL.Path, "err", err)
			} else {
				s.authLogs.unauthenticated.Warn("request refused: no valid credentials", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			}
			s.metrics.unauthorized.WithLabelValues(outcome).Inc()
			writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
			return nil, nil, false, false
		}
		u = resp.User
	}
	return r.WithContext(request.WithUser(r.Context(), u)), u, false, true
}

// authorize asks the authorizer whether u may do what r asks, and
// answers 403 (kube-apiserver's Forbidden Status) or, when the authorizer
// failed, 500 if not. A request to every cluster of a fleet (FleetCluster)
// allowed as such (ABAC's cluster "*", a webhook's answer for the extra
// "*") reads every cluster's events, those a removed source left
// included; otherwise it is asked for each cluster the server serves, and
// served from those it is allowed in (r is returned with that scope), or
// refused when there are none.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, u user.Info) (*http.Request, bool) {
	if s.cfg.Authorizer == nil {
		return r, true
	}
	attrs, err := s.attributes(r, u)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return r, false
	}
	decision, reason, err := s.cfg.Authorizer.Authorize(r.Context(), attrs)
	if decision == authorizer.DecisionAllow {
		return r, true
	}
	if sc := s.scopeOf(r.Context()); sc.fleet != nil {
		if allowed := s.allowedClusters(r, attrs); len(allowed) > 0 {
			return r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc.only(allowed))), true
		}
	}
	if err != nil {
		// Fail closed, with kube-apiserver's code: the request is not
		// the client's fault, and it may succeed when the webhook is back.
		s.metrics.forbidden.WithLabelValues(outcomeError).Inc()
		s.authLogs.authzError.Warn("request denied: authorization failed", "user", u.GetName(), "verb", attrs.Verb, "path", r.URL.Path, "err", err)
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("authorization failed, so the request is denied: %w", err)))
		return r, false
	}
	s.metrics.forbidden.WithLabelValues(outcomeRejected).Inc()
	s.authLogs.forbidden.Warn("request forbidden", "user", u.GetName(), "verb", attrs.Verb, "path", r.URL.Path, "reason", reason)
	writeStatus(w, responsewriters.ForbiddenStatusError(attrs, reason))
	return r, false
}

// allowedClusters returns the clusters of the fleet that attrs (of a
// request to every cluster) are allowed in, each asked as a request to
// that cluster; an authorizer's error counts as a refusal there.
func (s *Server) allowedClusters(r *http.Request, attrs ClusterAttributes) []string {
	var allowed []string
	for _, name := range s.clusterNames() {
		a := attrs
		a.Cluster = name
		a.User = withClusterExtra(attrs.AttributesRecord.User, name)
		if d, _, err := s.cfg.Authorizer.Authorize(r.Context(), a); err == nil && d == authorizer.DecisionAllow {
			allowed = append(allowed, name)
		}
	}
	return allowed
}

// ClusterExtra is the key of the user's extra under which authorizers
// find the cluster a request is to, when it is to a fleet's cluster: a
// webhook's SubjectAccessReview carries it in spec.extra. Requests to the
// root cluster carry none.
const ClusterExtra = "events.kubevents.io/cluster"

// ClusterAttributes are the attributes the server authorizes a request
// on: kube-apiserver's, and the cluster of a fleet the request is to.
type ClusterAttributes struct {
	authorizer.AttributesRecord
	// Cluster is the cluster the request is to: "" the root cluster, a
	// fleet's cluster by name, or FleetCluster for every cluster (then
	// also asked per cluster, see Server.authorize).
	Cluster string
}

// GetCluster returns the cluster the request is to.
func (a ClusterAttributes) GetCluster() string { return a.Cluster }

// ClusterOf returns the cluster of a request's authorization attributes:
// "" (the root cluster) for attributes that name none.
func ClusterOf(a authorizer.Attributes) string {
	if c, ok := a.(interface{ GetCluster() string }); ok {
		return c.GetCluster()
	}
	return ""
}

// withClusterExtra returns u with the cluster in its extra
// (ClusterExtra), or u itself for the root cluster.
func withClusterExtra(u user.Info, cluster string) user.Info {
	if cluster == "" || u == nil {
		return u
	}
	extra := make(map[string][]string, len(u.GetExtra())+1)
	for k, v := range u.GetExtra() {
		extra[k] = v
	}
	extra[ClusterExtra] = []string{cluster}
	return &user.DefaultInfo{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: extra}
}

// attributes are what the authorizer decides on, as kube-apiserver's
// filters derive them from the request info, with the cluster the request
// is to.
func (s *Server) attributes(r *http.Request, u user.Info) (ClusterAttributes, error) {
	info, err := s.requestInfo.NewRequestInfo(r)
	if err != nil {
		return ClusterAttributes{}, fmt.Errorf("cannot tell what the request asks for: %w", err)
	}
	cluster := s.scopeOf(r.Context()).name
	return ClusterAttributes{AttributesRecord: authorizer.AttributesRecord{
		User:            withClusterExtra(u, cluster),
		Verb:            info.Verb,
		Namespace:       info.Namespace,
		APIGroup:        info.APIGroup,
		APIVersion:      info.APIVersion,
		Resource:        info.Resource,
		Subresource:     info.Subresource,
		Name:            info.Name,
		ResourceRequest: info.IsResourceRequest,
		Path:            info.Path,
	}, Cluster: cluster}, nil
}
