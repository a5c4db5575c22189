//go:build !(linux && (amd64 || arm64))

package netio

import "net"

// peerGone cannot tell here: a reader held by backpressure sees its peer
// gone only when its writer fails (a write or a heartbeat).
func peerGone(net.Conn) bool { return false }
