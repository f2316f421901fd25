package access

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"
	tokenwebhook "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// InCluster, as the value of --authentication-kubeconfig or
// --authorization-kubeconfig, is the cluster eventsd runs in, reached
// with its pod's service account (rest.InClusterConfig), as
// --source=in-cluster is for the mirror.
const InCluster = "in-cluster"

// The ConfigMap in which kube-apiserver publishes its client CA and its
// front proxy's CA, allowed names and header names for the API servers it
// aggregates (kube's names; readable with the Role
// extension-apiserver-authentication-reader).
const (
	authenticationConfigMapNamespace = "kube-system"
	authenticationConfigMapName      = "extension-apiserver-authentication"
)

// tokenReviewTimeout bounds one TokenReview sent through
// --authentication-kubeconfig, as kube's aggregated servers bound it.
const tokenReviewTimeout = 10 * time.Second

// DefaultRequestHeader is Options.RequestHeader's default: the header
// names of kube's aggregated API servers (k8s.io/apiserver's
// DelegatingAuthenticationOptions), which are what kube-apiserver's
// aggregator sends: X-Remote-User, X-Remote-Group, X-Remote-Extra-.
// kube-apiserver's own flags have no default names.
func DefaultRequestHeader() options.RequestHeaderAuthenticationOptions {
	return options.NewDelegatingAuthenticationOptions().RequestHeader
}

// clusterConfig is the client configuration of a --*-kubeconfig flag's
// value: a kubeconfig file (its current context) or InCluster.
func clusterConfig(flag, value string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if value == InCluster {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: value}, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, value, err)
	}
	// Reviews are made per request (their answers cached): kube's
	// aggregated servers give them these limits, high enough not to
	// throttle the API.
	cfg.QPS, cfg.Burst = 200, 400
	cfg.UserAgent = "eventsd"
	return cfg, nil
}

func clusterClient(flag, value string) (kubernetes.Interface, error) {
	cfg, err := clusterConfig(flag, value)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, value, err)
	}
	return cs, nil
}

// delegated is what delegation to a cluster adds to the authenticators.
type delegated struct {
	// tokens checks bearer tokens with the cluster's TokenReviews.
	tokens authenticator.Token
	// clientCerts authenticates client certificates.
	clientCerts authenticator.Request
	// frontProxy authenticates the front proxy's requests.
	frontProxy authenticator.Request
	// runners keep CAs and front-proxy settings current (Built.Run).
	runners []dynamiccertificates.ControllerRunner
	// notes and warnings are for the log (Built).
	notes, warnings []string
}

// buildDelegated builds the client-certificate, front-proxy and
// TokenReview authenticators of o, as k8s.io/apiserver's
// DelegatingAuthenticationOptions.ApplyTo does for aggregated API servers,
// with two differences: no anonymous authenticator (a request no
// authenticator accepts is 401, as with eventsd's other flags), and the
// front proxy's authenticator apart, for server.Config.FrontProxy.
func buildDelegated(o Options) (*delegated, error) {
	d := &delegated{}
	if errs := o.RequestHeader.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var client kubernetes.Interface
	if o.AuthenticationKubeconfig != "" {
		var err error
		if client, err = clusterClient("--authentication-kubeconfig", o.AuthenticationKubeconfig); err != nil {
			return nil, err
		}
		wh, err := tokenwebhook.NewFromInterface(client.AuthenticationV1(), nil, retryBackoff(o), tokenReviewTimeout, tokenwebhook.AuthenticatorMetrics{
			RecordRequestTotal:   func(context.Context, string) {},
			RecordRequestLatency: func(context.Context, string, float64) {},
		})
		if err != nil {
			return nil, fmt.Errorf("--authentication-kubeconfig %s: %w", o.AuthenticationKubeconfig, err)
		}
		d.tokens = wh
		if ttl := ttl(o.TokenWebhookCacheTTL, DefaultTokenWebhookCacheTTL); ttl > 0 {
			d.tokens = tokencache.New(wh, false, ttl, ttl)
		}
	}
	lookup := client != nil && !o.SkipInClusterLookup
	configMap := authenticationConfigMapNamespace + "/" + authenticationConfigMapName

	// Client certificates.
	var clientCA dynamiccertificates.CAContentProvider
	switch {
	case o.ClientCert.ClientCA != "":
		p, err := o.ClientCert.GetClientCAContentProvider()
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file %s: %w", o.ClientCert.ClientCA, err)
		}
		clientCA = p
		d.notes = append(d.notes, "client certificates: CA from --client-ca-file "+o.ClientCert.ClientCA)
	case lookup:
		c, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", authenticationConfigMapNamespace, authenticationConfigMapName, "client-ca-file", client)
		if err != nil {
			return nil, err
		}
		clientCA = c
		d.notes = append(d.notes, "client certificates: CA from the cluster's ConfigMap "+configMap)
	}
	if clientCA != nil {
		d.clientCerts = x509request.NewDynamic(clientCA.VerifyOptions, x509request.CommonNameUserConversion)
		if r, ok := clientCA.(dynamiccertificates.ControllerRunner); ok {
			d.runners = append(d.runners, r)
		}
	}

	// The front proxy.
	var rh *authenticatorfactory.RequestHeaderConfig
	switch {
	case o.RequestHeader.ClientCAFile != "":
		var err error
		if rh, err = o.RequestHeader.ToAuthenticationRequestHeaderConfig(); err != nil {
			return nil, fmt.Errorf("--requestheader-client-ca-file %s: %w", o.RequestHeader.ClientCAFile, err)
		}
		d.notes = append(d.notes, fmt.Sprintf("front proxy: CA from --requestheader-client-ca-file %s, allowed names %v, user from %v, groups from %v, extra from %v",
			o.RequestHeader.ClientCAFile, o.RequestHeader.AllowedNames, o.RequestHeader.UsernameHeaders, o.RequestHeader.GroupHeaders, o.RequestHeader.ExtraHeaderPrefixes))
	case lookup:
		c, err := lookUpRequestHeader(client)
		if err != nil {
			if !o.TolerateInClusterLookupFailure {
				return nil, fmt.Errorf("--authentication-kubeconfig %s: looking up the front proxy's settings in the cluster's ConfigMap %s (read with the Role extension-apiserver-authentication-reader; --authentication-skip-lookup does without): %w",
					o.AuthenticationKubeconfig, configMap, err)
			}
			d.warnings = append(d.warnings, fmt.Sprintf("the front proxy's settings could not be looked up in %s (--authentication-tolerate-lookup-failure): requests it forwards are refused: %v", configMap, err))
			break
		}
		rh = c
		d.notes = append(d.notes, "front proxy: CA, allowed names and header names from the cluster's ConfigMap "+configMap)
	}
	if rh != nil {
		// Without anonymous, the factory's authenticator is the front
		// proxy's alone, in system:authenticated as kube's.
		fp, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{RequestHeaderConfig: rh}.New()
		if err != nil {
			return nil, err
		}
		d.frontProxy = fp
		if r, ok := rh.CAContentProvider.(dynamiccertificates.ControllerRunner); ok {
			d.runners = append(d.runners, r)
		}
	}
	return d, nil
}

// lookUpRequestHeader reads the front proxy's settings from the cluster's
// ConfigMap now, and follows them once run, as k8s.io/apiserver's
// DelegatingAuthenticationOptions does.
func lookUpRequestHeader(client kubernetes.Interface) (*authenticatorfactory.RequestHeaderConfig, error) {
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", authenticationConfigMapNamespace, authenticationConfigMapName, "requestheader-client-ca-file", client)
	if err != nil {
		return nil, err
	}
	c := &options.DynamicRequestHeaderController{
		ConfigMapCAController: ca,
		RequestHeaderAuthRequestController: headerrequest.NewRequestHeaderAuthRequestController(authenticationConfigMapName, authenticationConfigMapNamespace, client,
			"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers", "requestheader-extra-headers-prefix", "requestheader-allowed-names"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), tokenReviewTimeout)
	defer cancel()
	if err := c.RunOnce(ctx); err != nil {
		return nil, err
	}
	return &authenticatorfactory.RequestHeaderConfig{
		CAContentProvider:   c,
		UsernameHeaders:     headerrequest.StringSliceProviderFunc(c.UsernameHeaders),
		UIDHeaders:          headerrequest.StringSliceProviderFunc(c.UIDHeaders),
		GroupHeaders:        headerrequest.StringSliceProviderFunc(c.GroupHeaders),
		ExtraHeaderPrefixes: headerrequest.StringSliceProviderFunc(c.ExtraHeaderPrefixes),
		AllowedClientNames:  headerrequest.StringSliceProviderFunc(c.AllowedClientNames),
	}, nil
}

// newDelegatingAuthorizer is mode Webhook through --authorization-kubeconfig:
// the cluster's SubjectAccessReviews, with k8s.io/apiserver's
// DelegatingAuthorizerConfig (kube's aggregated servers' authorizer) and
// eventsd's cache TTLs.
func newDelegatingAuthorizer(o Options) (authorizer.Authorizer, error) {
	client, err := clusterClient("--authorization-kubeconfig", o.AuthorizationKubeconfig)
	if err != nil {
		return nil, err
	}
	backoff := retryBackoff(o)
	a, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             ttl(o.AuthorizedTTL, DefaultAuthorizedTTL),
		DenyCacheTTL:              ttl(o.UnauthorizedTTL, DefaultUnauthorizedTTL),
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("--authorization-kubeconfig %s: %w", o.AuthorizationKubeconfig, err)
	}
	return a, nil
}

// Run keeps what Build looked up or read from files current until ctx
// ends: CA files are read again when they change, and the cluster's
// ConfigMap is followed. It returns once ctx is done and what it started
// has stopped. Without such settings it waits for ctx and returns.
func (b Built) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range b.runners {
		wg.Go(func() { r.Run(ctx, 1) })
	}
	<-ctx.Done()
	wg.Wait()
}
