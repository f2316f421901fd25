// Package eventratelimit limits the rate at which Events are written, in
// the configuration format of kube-apiserver's EventRateLimit admission
// plugin: an AdmissionConfiguration (apiserver.config.k8s.io/v1) whose
// EventRateLimit entry holds, inline or by path, a Configuration
// (eventratelimit.admission.k8s.io/v1alpha1) listing token-bucket limits of
// type Server, Namespace, User and SourceAndObject.
//
// It differs from upstream's plugin where upstream falls short:
//   - the caller decides what is limited; eventsd limits creates, updates
//     and patches of both core/v1 and events.k8s.io/v1 Events (upstream's
//     check on the core Event kind lets events.k8s.io/v1 writes through);
//   - a refusal says how long until the bucket that refused has a token
//     again (Decision.RetryAfter), for a Retry-After answer;
//   - a refused write takes no token from any bucket (upstream's takes one
//     from every bucket that had one), so a storm the SourceAndObject limit
//     refuses does not also drain its namespace's allowance;
//   - novelty first: when only SourceAndObject buckets refuse and the
//     caller says the event is the first for its (object, reason), it is
//     admitted, still bounded by the other limits;
//   - SourceAndObject keys separate their parts, so that two different
//     sources and objects cannot share a bucket by concatenating alike.
package eventratelimit
