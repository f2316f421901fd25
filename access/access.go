package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	requestunion "k8s.io/apiserver/pkg/authentication/request/union"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authzunion "k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"
	utilwebhook "k8s.io/apiserver/pkg/util/webhook"
	tokenwebhook "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	authzwebhook "k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	authzwebhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"

	"github.com/kubevents/kubevents/server"
)

// Authorization modes (--authorization-mode), kube-apiserver's names.
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeABAC        = "ABAC"
	ModeWebhook     = "Webhook"
)

// Defaults of Options, kube-apiserver's.
const (
	// DefaultAuthorizedTTL is how long a webhook's allow is cached
	// (--authorization-webhook-cache-authorized-ttl).
	DefaultAuthorizedTTL = 5 * time.Minute
	// DefaultUnauthorizedTTL is how long a webhook's deny is cached
	// (--authorization-webhook-cache-unauthorized-ttl).
	DefaultUnauthorizedTTL = 30 * time.Second
	// DefaultTokenWebhookCacheTTL is how long a TokenReview answer is
	// cached (--authentication-token-webhook-cache-ttl).
	DefaultTokenWebhookCacheTTL = 2 * time.Minute
	// DefaultWebhookVersion is the API version of the reviews sent to
	// webhooks. kube-apiserver's default is still v1beta1; v1 is what
	// current webhooks (and kube-apiserver itself) answer.
	DefaultWebhookVersion = "v1"
)

// Options are the authentication and authorization flags. The zero value
// is eventsd's default: no authentication (every request is
// system:anonymous) and AlwaysAllow. The flags are kube-apiserver's, and
// for delegation to a cluster (eventsd as an aggregated API server) those
// of kube's aggregated servers.
type Options struct {
	// TokenAuthFile is a static token file (--token-auth-file).
	TokenAuthFile string
	// TokenWebhookConfigFile is a kubeconfig naming a TokenReview
	// webhook (--authentication-token-webhook-config-file).
	TokenWebhookConfigFile string
	// TokenWebhookVersion is v1 or v1beta1; DefaultWebhookVersion when
	// empty.
	TokenWebhookVersion string
	// TokenWebhookCacheTTL caches TokenReview answers;
	// DefaultTokenWebhookCacheTTL when zero, no cache when negative.
	TokenWebhookCacheTTL time.Duration

	// RequestHeader authenticates the requests of an authenticating
	// front proxy, a cluster's kube-apiserver aggregating eventsd's group
	// (kube-apiserver's --requestheader-* flags): with ClientCAFile set,
	// a request whose client certificate that CA verifies, with a common
	// name in AllowedNames when any are given, is the user the headers
	// name. Header names default to DefaultRequestHeader's.
	RequestHeader options.RequestHeaderAuthenticationOptions
	// ClientCert authenticates client certificates its CA verifies
	// (--client-ca-file): the common name is the user, the organizations
	// are its groups.
	ClientCert options.ClientCertAuthenticationOptions
	// AuthenticationKubeconfig is the cluster that authenticates bearer
	// tokens with TokenReviews (--authentication-kubeconfig, as kube's
	// aggregated servers take it): a kubeconfig file, or InCluster.
	// Unless SkipInClusterLookup, the front proxy's settings and the
	// client CA not given by flags are read from the cluster's ConfigMap
	// kube-system/extension-apiserver-authentication, and followed.
	AuthenticationKubeconfig string
	// SkipInClusterLookup (--authentication-skip-lookup) reads nothing
	// from the cluster's ConfigMap.
	SkipInClusterLookup bool
	// TolerateInClusterLookupFailure
	// (--authentication-tolerate-lookup-failure) makes a failed lookup a
	// warning: the front proxy's requests are then refused.
	TolerateInClusterLookupFailure bool

	// AuthorizationModes are tried in order until one allows or denies;
	// AlwaysAllow when empty.
	AuthorizationModes []string
	// PolicyFile is the ABAC policy file (--authorization-policy-file),
	// required by and only allowed with mode ABAC.
	PolicyFile string
	// AuthzWebhookConfigFile is a kubeconfig naming a
	// SubjectAccessReview webhook
	// (--authorization-webhook-config-file), required by and only
	// allowed with mode Webhook.
	AuthzWebhookConfigFile string
	// AuthzWebhookVersion is v1 or v1beta1; DefaultWebhookVersion when
	// empty.
	AuthzWebhookVersion string
	// AuthorizationKubeconfig is, instead of AuthzWebhookConfigFile, the
	// cluster whose SubjectAccessReviews decide mode Webhook
	// (--authorization-kubeconfig, as kube's aggregated servers take
	// it): a kubeconfig file, or InCluster.
	AuthorizationKubeconfig string
	// AuthorizedTTL and UnauthorizedTTL cache the webhook's allows and
	// denies; their defaults when zero, no caching when negative.
	AuthorizedTTL, UnauthorizedTTL time.Duration
	// WebhookRetryBackoff is how webhook calls are retried on transient
	// errors; kube-apiserver's (500ms, 1.5x, 5 steps) when nil.
	WebhookRetryBackoff *wait.Backoff
}

// Built is what Build returns: nil members mean no authentication
// (system:anonymous) and AlwaysAllow.
type Built struct {
	// Authenticator authenticates bearer tokens and client certificates;
	// nil without token or client-certificate flags.
	Authenticator authenticator.Request
	// FrontProxy authenticates an authenticating front proxy's requests
	// (server.Config.FrontProxy); nil without one.
	FrontProxy authenticator.Request
	// ClientCertificates reports that requests may authenticate with
	// client certificates (the front proxy's or users'): the server must
	// serve TLS and ask clients for one (tls.RequestClientCert; the
	// authenticators verify them).
	ClientCertificates bool
	// Authorizer decides requests; nil when the only mode is AlwaysAllow.
	Authorizer authorizer.UnconditionalAuthorizer
	// Modes are the authorization modes in effect, for logging.
	Modes []string
	// Notes say where certificate authorities and front-proxy settings
	// come from; Warnings what could not be had and was tolerated. Both
	// are for the log.
	Notes, Warnings []string

	// runners keep files and looked-up settings current (Run).
	runners []dynamiccertificates.ControllerRunner
}

// Build validates o and builds the authenticator and authorizer.
//
// What it reads from a cluster (the front proxy's settings) it reads now;
// Run keeps that and the CA files current.
func Build(o Options) (Built, error) {
	var b Built
	d, err := buildDelegated(o)
	if err != nil {
		return Built{}, err
	}
	b.FrontProxy, b.runners, b.Notes, b.Warnings = d.frontProxy, d.runners, d.notes, d.warnings
	b.ClientCertificates = d.frontProxy != nil || d.clientCerts != nil
	if b.Authenticator, err = buildAuthenticator(o, d); err != nil {
		return Built{}, err
	}
	modes := o.AuthorizationModes
	if len(modes) == 0 {
		modes = []string{ModeAlwaysAllow}
	}
	b.Modes = modes
	if b.Authorizer, err = buildAuthorizer(o, modes); err != nil {
		return Built{}, err
	}
	if b.Authorizer != nil && b.Authenticator == nil && b.FrontProxy == nil {
		return Built{}, fmt.Errorf("--authorization-mode=%s needs authentication (--token-auth-file, --authentication-token-webhook-config-file, --authentication-kubeconfig, --client-ca-file or --requestheader-client-ca-file): without it every request is %s", strings.Join(modes, ","), user.Anonymous)
	}
	return b, nil
}

func retryBackoff(o Options) wait.Backoff {
	if o.WebhookRetryBackoff != nil {
		return *o.WebhookRetryBackoff
	}
	return *authzwebhook.DefaultRetryBackoff()
}

func webhookVersion(flag, v string) (string, error) {
	switch v {
	case "":
		return DefaultWebhookVersion, nil
	case "v1", "v1beta1":
		return v, nil
	}
	return "", fmt.Errorf("%s: %q is neither v1 nor v1beta1", flag, v)
}

func ttl(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// buildAuthenticator chains the token authenticators (the file, the
// TokenReview webhook, the cluster's TokenReviews) and the client
// certificates' (d); the front proxy's stays apart.
func buildAuthenticator(o Options, d *delegated) (authenticator.Request, error) {
	var tokens []authenticator.Token
	if o.TokenAuthFile != "" {
		ta, err := server.LoadTokenFile(o.TokenAuthFile)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, ta)
	}
	if o.TokenWebhookConfigFile != "" {
		version, err := webhookVersion("--authentication-token-webhook-version", o.TokenWebhookVersion)
		if err != nil {
			return nil, err
		}
		cfg, err := utilwebhook.LoadKubeconfig(o.TokenWebhookConfigFile, nil)
		if err != nil {
			return nil, fmt.Errorf("--authentication-token-webhook-config-file %s: %w", o.TokenWebhookConfigFile, err)
		}
		wh, err := tokenwebhook.New(cfg, version, nil, retryBackoff(o))
		if err != nil {
			return nil, fmt.Errorf("--authentication-token-webhook-config-file %s: %w", o.TokenWebhookConfigFile, err)
		}
		var t authenticator.Token = wh
		if d := ttl(o.TokenWebhookCacheTTL, DefaultTokenWebhookCacheTTL); d > 0 {
			// Errors (a webhook down) are not cached: the next request
			// asks again.
			t = tokencache.New(wh, false, d, d)
		}
		tokens = append(tokens, t)
	}
	if d.tokens != nil {
		tokens = append(tokens, d.tokens)
	}
	var reqs []authenticator.Request
	if d.clientCerts != nil {
		reqs = append(reqs, d.clientCerts)
	}
	if len(tokens) > 0 {
		reqs = append(reqs, bearerRequest{bearertoken.New(recordingToken{tokenunion.New(tokens...)})})
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	// Authenticated users are in system:authenticated, as in
	// kube-apiserver, so policies can name everyone with a token.
	return group.NewAuthenticatedGroupAdder(requestunion.New(reqs...)), nil
}

// bearerRequest is bearertoken's authenticator, except that a token no
// token authenticator accepts, without any of them failing, is a plain
// rejection (not ok, no error), as a request without a token is:
// bearertoken reports it as an "invalid bearer token" error, which would
// make a storm of bad tokens look like (and be logged with) a webhook
// outage.
type bearerRequest struct{ bearer authenticator.Request }

// tokenOutcome is where recordingToken leaves, for bearerRequest, the
// error of the token authenticators for one request.
type tokenOutcome struct{ err error }

type tokenOutcomeKey struct{}

// AuthenticateRequest implements authenticator.Request.
func (b bearerRequest) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	o := &tokenOutcome{}
	// The copy shares r's headers, so bearertoken's removal of the
	// Authorization header after success applies to r.
	resp, ok, err := b.bearer.AuthenticateRequest(r.WithContext(context.WithValue(r.Context(), tokenOutcomeKey{}, o)))
	if !ok && err != nil && o.err == nil {
		return nil, false, nil
	}
	return resp, ok, err
}

// recordingToken records its token authenticator's error in the request's
// tokenOutcome.
type recordingToken struct{ authenticator.Token }

// AuthenticateToken implements authenticator.Token.
func (t recordingToken) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	resp, ok, err := t.Token.AuthenticateToken(ctx, token)
	if o, _ := ctx.Value(tokenOutcomeKey{}).(*tokenOutcome); o != nil {
		o.err = err
	}
	return resp, ok, err
}

func buildAuthorizer(o Options, modes []string) (authorizer.Authorizer, error) {
	seen := map[string]bool{}
	// Members of system:masters may do anything, before any mode is
	// asked, as in kube-apiserver.
	chain := []authzunion.NamedAuthorizer{{AuthorizerName: "system:masters", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)}}
	for _, m := range modes {
		if seen[m] {
			return nil, fmt.Errorf("--authorization-mode: %s given twice", m)
		}
		seen[m] = true
		var a authorizer.Authorizer
		switch m {
		case ModeAlwaysAllow:
			a = authorizerfactory.NewAlwaysAllowAuthorizer()
		case ModeAlwaysDeny:
			a = authorizerfactory.NewAlwaysDenyAuthorizer()
		case ModeABAC:
			if o.PolicyFile == "" {
				return nil, errors.New("--authorization-mode=ABAC needs --authorization-policy-file")
			}
			pl, err := LoadPolicyFile(o.PolicyFile)
			if err != nil {
				return nil, err
			}
			a = authorizer.AuthorizerFunc(pl.Authorize)
		case ModeWebhook:
			var wa authorizer.Authorizer
			var err error
			switch {
			case o.AuthzWebhookConfigFile != "" && o.AuthorizationKubeconfig != "":
				return nil, errors.New("--authorization-mode=Webhook takes --authorization-webhook-config-file or --authorization-kubeconfig, not both")
			case o.AuthzWebhookConfigFile != "":
				wa, err = newAuthzWebhook(o)
			case o.AuthorizationKubeconfig != "":
				wa, err = newDelegatingAuthorizer(o)
			default:
				return nil, errors.New("--authorization-mode=Webhook needs --authorization-webhook-config-file or --authorization-kubeconfig")
			}
			if err != nil {
				return nil, err
			}
			a = wa
		case "RBAC", "Node":
			return nil, fmt.Errorf("--authorization-mode: eventsd has no %s mode: point Webhook at a cluster's SubjectAccessReview API to use its RBAC", m)
		default:
			return nil, fmt.Errorf("--authorization-mode: unknown mode %q: want a comma-separated list of %s, %s, %s, %s", m, ModeAlwaysAllow, ModeAlwaysDeny, ModeABAC, ModeWebhook)
		}
		chain = append(chain, authzunion.NamedAuthorizer{AuthorizerName: m, Authorizer: a})
	}
	if o.PolicyFile != "" && !seen[ModeABAC] {
		return nil, errors.New("--authorization-policy-file needs --authorization-mode to include ABAC")
	}
	if o.AuthzWebhookConfigFile != "" && !seen[ModeWebhook] {
		return nil, errors.New("--authorization-webhook-config-file needs --authorization-mode to include Webhook")
	}
	if o.AuthorizationKubeconfig != "" && !seen[ModeWebhook] {
		return nil, errors.New("--authorization-kubeconfig needs --authorization-mode to include Webhook")
	}
	if len(modes) == 1 && modes[0] == ModeAlwaysAllow {
		// Nothing to decide: the server skips authorization.
		return nil, nil
	}
	return authzunion.New(chain...)
}

func newAuthzWebhook(o Options) (authorizer.Authorizer, error) {
	version, err := webhookVersion("--authorization-webhook-version", o.AuthzWebhookVersion)
	if err != nil {
		return nil, err
	}
	cfg, err := utilwebhook.LoadKubeconfig(o.AuthzWebhookConfigFile, nil)
	if err != nil {
		return nil, fmt.Errorf("--authorization-webhook-config-file %s: %w", o.AuthzWebhookConfigFile, err)
	}
	// A webhook that fails has no opinion, and the error denies the
	// request unless a later mode allows it, as in kube-apiserver.
	wa, err := authzwebhook.New(cfg, version, ttl(o.AuthorizedTTL, DefaultAuthorizedTTL), ttl(o.UnauthorizedTTL, DefaultUnauthorizedTTL),
		retryBackoff(o), authorizer.DecisionNoOpinion, nil, ModeWebhook, authzwebhookmetrics.NoopAuthorizerMetrics{}, nil)
	if err != nil {
		return nil, fmt.Errorf("--authorization-webhook-config-file %s: %w", o.AuthzWebhookConfigFile, err)
	}
	return wa, nil
}
