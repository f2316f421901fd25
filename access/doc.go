// Package access builds eventsd's authenticator and authorizer from
// kube-apiserver's flags: a static token file and a TokenReview webhook
// for authentication; AlwaysAllow, AlwaysDeny, ABAC and a
// SubjectAccessReview webhook, chained in the order given, for
// authorization. The pieces are k8s.io/apiserver's (bearer token
// authentication, the webhook clients and their caches, the union
// authorizer, the system:masters authorizer) except the ABAC authorizer,
// which lives in k8s.io/kubernetes and is reimplemented here over the
// same policy file format.
package access
