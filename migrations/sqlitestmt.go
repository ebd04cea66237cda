package migrations

import (
	"container/list"
	"context"
	"database/sql/driver"
	"sync"
)

// modernc's SQLite parses the text of every statement it runs (database/sql prepares nothing
// for a connection with ExecerContext and QueryerContext), and its parser is transpiled C run
// as Go: in a burst of channel deliveries on svc up, a tenth of the process's CPU parsed the
// same few statements (the queue's claim, the intake's inserts) again and again. Each
// connection therefore keeps its most recent statements prepared, by their text: a statement
// run again is bound and stepped, not parsed and planned. SQLite re-prepares a kept statement
// by itself when the schema changes under it (sqlite3_prepare_v2).

// stmtCacheSize is how many statements a connection keeps prepared.
const stmtCacheSize = 64

// stmtCacheMaxLen is the longest statement text kept prepared: a statement built with a
// VALUES list as long as its batch is rarely run twice, and its program is large.
const stmtCacheMaxLen = 4096

// keeps says whether query is kept prepared: statements that read or change rows, run again
// and again, not the schema's (a migration's), a PRAGMA or a transaction's control.
func keeps(query string) bool {
	return len(query) <= stmtCacheMaxLen && startsWith(query, "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE")
}

// sqliteStmt is what a kept statement is used for.
type sqliteStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// keptStmt is a prepared statement of a connection. While rows of it are open (busy) it is not
// run again: the same text runs unprepared meanwhile (a transaction may query while it reads
// rows). One evicted while busy is closed when its rows are.
type keptStmt struct {
	query   string
	st      sqliteStmt
	busy    bool
	evicted bool
}

// stmtCache is the statements a connection keeps prepared, the most recently used first.
// database/sql calls a connection from one goroutine at a time, but a Rows may be closed from
// the goroutine that watches its context, so the cache has a lock of its own.
type stmtCache struct {
	mu    sync.Mutex
	bySQL map[string]*list.Element // of *keptStmt
	lru   list.List
}

// take returns the kept statement of query, prepared on conn now if it is not kept yet, marked
// busy; nil (run it unprepared) when its rows are open or the text is not kept (keeps).
func (c *stmtCache) take(ctx context.Context, conn driver.ConnPrepareContext, query string) (*keptStmt, error) {
	if !keeps(query) {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.bySQL[query]; ok {
		s := e.Value.(*keptStmt)
		if s.busy {
			return nil, nil
		}
		c.lru.MoveToFront(e)
		s.busy = true
		return s, nil
	}
	st, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	sst, ok := st.(sqliteStmt)
	if !ok { // not modernc's statement: run it unprepared
		_ = st.Close()
		return nil, nil
	}
	if c.bySQL == nil {
		c.bySQL = make(map[string]*list.Element)
	}
	s := &keptStmt{query: query, st: sst, busy: true}
	c.bySQL[query] = c.lru.PushFront(s)
	for c.lru.Len() > stmtCacheSize {
		c.evict(c.lru.Back())
	}
	return s, nil
}

// evict forgets e's statement, closing it unless its rows are open.
func (c *stmtCache) evict(e *list.Element) {
	s := e.Value.(*keptStmt)
	c.lru.Remove(e)
	delete(c.bySQL, s.query)
	s.evicted = true
	if !s.busy {
		_ = s.st.Close()
	}
}

// give returns s after its run (its rows closed).
func (c *stmtCache) give(s *keptStmt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.busy = false
	if s.evicted {
		_ = s.st.Close()
	}
}

// close closes every kept statement, before its connection closes.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.Len() > 0 {
		c.evict(c.lru.Front())
	}
}

// exec runs query on conn, prepared once.
func (c *stmtCache) exec(ctx context.Context, conn sqliteConn, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.take(ctx, conn, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return conn.ExecContext(ctx, query, args)
	}
	defer c.give(s)
	return s.st.ExecContext(ctx, args)
}

// query runs query on conn, prepared once; the statement is given back when its rows close.
func (c *stmtCache) query(ctx context.Context, conn sqliteConn, query string, args []driver.NamedValue) (sqliteRows, *keptStmt, error) {
	s, err := c.take(ctx, conn, query)
	if err != nil {
		return nil, nil, err
	}
	var rows driver.Rows
	if s == nil {
		rows, err = conn.QueryContext(ctx, query, args)
	} else if rows, err = s.st.QueryContext(ctx, args); err != nil {
		c.give(s)
	}
	if err != nil {
		return nil, nil, err
	}
	return rows.(sqliteRows), s, nil
}
