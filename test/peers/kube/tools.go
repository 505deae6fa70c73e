//go:build tools

// Package peers pins Kubernetes v1.37.2 (kube-apiserver, kube-controller-manager,
// kube-scheduler, kubectl, and kubemark, whose hollow node runs the real kubelet),
// with every staging module k8s.io/X v0.0.0 replaced by k8s.io/X v0.37.2, so scripts/peers.sh
// can build them.
package peers

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubemark"
)
