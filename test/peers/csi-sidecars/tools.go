//go:build tools

// Package peers pins the CSI sidecars built on Kubernetes' v0.37 client libraries:
// external-attacher (ControllerPublish for VolumeAttachments) and external-resizer
// (ControllerExpandVolume for claims). One module, so they share one build of those
// libraries; its replace lines are external-attacher's own. scripts/peers.sh builds each.
package peers

import (
	_ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
	_ "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
)
