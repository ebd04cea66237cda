//go:build !linux

package models

import "net"

// open cannot peek without waiting here: an idle connection the server closed fails its next
// request before any answer, which the transport then sends once more on a new connection.
func open(net.Conn) bool { return true }
