// Package sourcesconfig is eventsd's --sources-config file: a
// SourcesConfiguration (eventsd.kubevents.io/v1alpha1) listing the
// clusters one eventsd mirrors, each a source with a name (the cluster's
// name in eventsd's fleet, served at /clusters/NAME/), how to reach its
// kube-apiserver (a kubeconfig and context, or the pod's service
// account), and the per-source equivalents of the single source's
// --source-* flags, with the same defaults. It is decoded strictly, as
// eventsd's other configuration files (internal/configfile), and its
// errors name the field (sources[1].name: Invalid value: "East": ...).
package sourcesconfig
