package loop

import (
	"sync"

	"svc/runner/models"
)

// Queue carries messages sent to a running turn (POST /chat/sessions/{id}/messages) into the
// loop, which reads them between steps. Its methods are safe for concurrent use.
type Queue struct {
	mu     sync.Mutex
	msgs   []models.Message
	closed bool
}

// NewQueue returns an open, empty queue.
func NewQueue() *Queue { return &Queue{} }

// Push queues m. It reports false when the turn no longer accepts messages.
func (q *Queue) Push(m models.Message) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.msgs = append(q.msgs, m)
	return true
}

// drain takes the queued messages.
func (q *Queue) drain() []models.Message {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	msgs := q.msgs
	q.msgs = nil
	return msgs
}

// closeIfEmpty closes the queue when nothing is queued and reports true; otherwise it leaves
// it open and returns the queued messages, which the loop must answer before stopping.
func (q *Queue) closeIfEmpty() ([]models.Message, bool) {
	if q == nil {
		return nil, true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) > 0 {
		msgs := q.msgs
		q.msgs = nil
		return msgs, false
	}
	q.closed = true
	return nil, true
}

// Close stops accepting messages and returns those that were queued and not read.
func (q *Queue) Close() []models.Message {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	msgs := q.msgs
	q.msgs = nil
	return msgs
}
