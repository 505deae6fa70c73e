//go:build tools

// Package peers pins csi-sanity, the CSI conformance suite, so scripts/peers.sh can build it.
package peers

import _ "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
