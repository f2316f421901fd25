// Package eventapi holds the API semantics of Kubernetes Events that do not
// depend on how they are served or stored: conversion between core/v1 and
// events.k8s.io/v1, validation as kube-apiserver applies it for each group,
// the selectable fields (upstream's plus kubevents' extensions), and the
// server-side Table rendering kubectl asks for.
//
// The storage version is core/v1: every Event is held as a *corev1.Event and
// converted to events.k8s.io/v1 only at the edge, exactly as kube-apiserver
// stores both groups in one keyspace. eventsd's own group,
// events.kubevents.io/v1 (KubeventsV1), serves the same events in the
// events.k8s.io/v1 shape under a group a cluster's kube-apiserver can
// delegate to eventsd (API aggregation).
package eventapi
