//go:build !linux

package park

// pollWatch is false: without epoll each parked connection is watched by a goroutine's read.
func pollWatch(*Conn) bool { return false }

func pollUnwatch(*Conn) {}
