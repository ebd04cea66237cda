package models

import (
	"net"
	"syscall"
)

// open reports whether an idle connection is still open: a peek that does not wait finds no
// byte to read (EAGAIN). A read of 0 bytes is the server's close; a byte is an answer no
// request asked for. Either way the connection is not used again.
func open(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	}); err != nil {
		return false
	}
	return alive
}
