//go:build linux && (amd64 || arm64)

package netio

import (
	"net"
	"syscall"
)

// tcpEstablished is Linux's TCP_ESTABLISHED, tcp_info's first byte
// (tcpi_state) while both sides may still send.
const tcpEstablished = 1

// peerGone reports whether c's peer closed or reset the connection, as
// the kernel sees it, without reading from it: the state in the first
// byte of TCP_INFO (the first four bytes read as a little-endian int) is
// anything but established (CLOSE_WAIT after the peer's FIN, even with
// unread data before it; CLOSE after a reset). False when it cannot tell.
func peerGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		v, err := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_INFO)
		gone = err == nil && byte(v) != tcpEstablished
	})
	return gone
}
