//go:build tools

// Package peers pins external-provisioner v6.4.0, the CSI sidecar that calls CreateVolume for
// claims; its replace lines are its own (Kubernetes v0.36), so scripts/peers.sh can build it.
package peers

import (
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
)
