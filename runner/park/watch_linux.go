package park

import (
	"sync"
	"syscall"
)

// poller watches every parked connection of the process for its client leaving with one
// epoll instance and at most one goroutine, which runs while connections are watched: a
// goroutine per parked stream, blocked in a read, would cost its stack (2 KiB or more) for
// each. A connection is registered one-shot for EPOLLRDHUP (the client closed its side) and
// EPOLLIN: data without the hang-up is a request sent ahead, left in the socket for the server.
type poller struct {
	once sync.Once
	fd   int // the epoll instance, -1 when it could not be made
	mu   sync.Mutex
	next uint64
	live map[uint64]*Conn
	runs bool // the wait loop runs
}

var watcher poller

// pollWait bounds each epoll_wait, so that the loop sees when no connection is left and ends.
const pollWait = 200 // ms

// pollWatch registers c with the poller; false when it cannot (then c is watched otherwise).
func pollWatch(c *Conn) bool {
	p := &watcher
	p.once.Do(func() {
		p.fd, _ = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if p.fd <= 0 {
			p.fd = -1
		}
		p.live = map[uint64]*Conn{}
	})
	sc, ok := c.conn.(syscall.Conn)
	if !ok || p.fd < 0 {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	id := p.next
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLIN | syscall.EPOLLONESHOT, Fd: int32(id), Pad: int32(id >> 32)}
		cerr = syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	}); err != nil || cerr != nil {
		return false
	}
	c.polled = id
	p.live[id] = c
	if !p.runs {
		p.runs = true
		go p.loop()
	}
	return true
}

// pollUnwatch removes c from the poller: after it, no event of c's is delivered.
func pollUnwatch(c *Conn) {
	p := &watcher
	p.mu.Lock()
	delete(p.live, c.polled)
	p.mu.Unlock()
	if sc, ok := c.conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _ = syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
		}
	}
}

// loop delivers the poller's events until no connection is watched.
func (p *poller) loop() {
	evs := make([]syscall.EpollEvent, 64)
	for {
		n, err := syscall.EpollWait(p.fd, evs, pollWait)
		if err != nil && err != syscall.EINTR {
			n = 0
		}
		p.mu.Lock()
		for _, ev := range evs[:max(n, 0)] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			c := p.live[id]
			if c == nil {
				continue // unwatched meanwhile
			}
			delete(p.live, id) // one-shot: nothing more comes from it
			if ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
				c.mu.Lock()
				c.leftNow()
				c.mu.Unlock()
			}
		}
		if len(p.live) == 0 {
			p.runs = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}
