//go:build tools

// Package peers pins etcd v3.6.16, the store of scripts/kube-up.sh's kube-apiserver,
// so scripts/peers.sh can build it.
package peers

import (
	_ "go.etcd.io/etcd/server/v3"
)
