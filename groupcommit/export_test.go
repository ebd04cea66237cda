package groupcommit

// Waiting is how many calls wait for the next batch.
func (g *Group[In, Out]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}
