package migrations

import (
	"context"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"
)

// SQLite lets one connection write at a time. A writer that finds the database locked is
// made to wait by SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50,
// then 100 ms between tries: under contention (a burst of channel deliveries beside the turns
// of the burst before) writers slept tens of milliseconds past the moment the lock was free.
// The connections of a process therefore take a write lock of their own first, one per
// database file, which hands over the moment it is released, in arrival order: a transaction
// holds it from BEGIN to COMMIT or ROLLBACK (every transaction is BEGIN IMMEDIATE, a writer),
// a statement outside one for as long as it runs (until its rows are closed, for INSERT ...
// RETURNING). Reads outside a transaction take nothing (WAL lets them run beside the writer).
// SQLite's own lock and busy handler remain, for the writers of other processes.

// writeLockWait bounds the wait for the write lock, as the busy timeout bounds SQLite's.
const writeLockWait = 10 * time.Second

// writeLocks are the write locks of the process, by database file.
var writeLocks sync.Map // path -> chan struct{} (capacity 1: held while it holds a value)

func writeLockOf(path string) chan struct{} {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	l, _ := writeLocks.LoadOrStore(path, make(chan struct{}, 1))
	return l.(chan struct{})
}

// lockedConnector opens connections to one SQLite file that take its write lock.
type lockedConnector struct {
	dsn  string
	lock chan struct{}
	drv  *msqlite.Driver
}

func newLockedConnector(path, dsn string) *lockedConnector {
	return &lockedConnector{dsn: dsn, lock: writeLockOf(path), drv: &msqlite.Driver{}}
}

func (c *lockedConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &lockedConn{conn: conn.(sqliteConn), lock: c.lock}, nil
}

func (c *lockedConnector) Driver() driver.Driver { return c.drv }

// sqliteConn is what database/sql uses of modernc's connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// lockedConn is a connection that takes the write lock for its transactions and its writes.
// database/sql uses a connection from one goroutine at a time.
type lockedConn struct {
	conn  sqliteConn
	lock  chan struct{}
	inTx  bool
	stmts stmtCache // sqlitestmt.go
}

// acquire takes the write lock, waiting at most writeLockWait or until ctx ends.
func (c *lockedConn) acquire(ctx context.Context) error {
	select {
	case c.lock <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(writeLockWait)
	defer t.Stop()
	select {
	case c.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("sqlite: database is locked: no write lock within %s (a transaction of this process holds it)", writeLockWait)
	}
}

func (c *lockedConn) release() { <-c.lock }

// writes says whether query may write: anything but a read (SELECT, EXPLAIN, PRAGMA, VALUES).
func writes(query string) bool {
	return !startsWith(query, "SELECT", "EXPLAIN", "PRAGMA", "VALUES")
}

// startsWith says whether query, past blanks and opening parentheses, starts with one of
// words, in any case.
func startsWith(query string, words ...string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	for _, w := range words {
		if len(q) >= len(w) && strings.EqualFold(q[:len(w)], w) {
			return true
		}
	}
	return false
}

func (c *lockedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	tx, err := c.conn.BeginTx(ctx, opts)
	if err != nil {
		c.release()
		return nil, err
	}
	c.inTx = true
	return &lockedTx{tx: tx, c: c}, nil
}

func (c *lockedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *lockedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.inTx || !writes(query) {
		return c.stmts.exec(ctx, c.conn, query, args)
	}
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.release()
	return c.stmts.exec(ctx, c.conn, query, args)
}

func (c *lockedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	locks := !c.inTx && writes(query)
	if locks {
		if err := c.acquire(ctx); err != nil {
			return nil, err
		}
	}
	rows, kept, err := c.stmts.query(ctx, c.conn, query, args)
	if err != nil {
		if locks {
			c.release()
		}
		return nil, err
	}
	if !locks && kept == nil {
		return rows, nil
	}
	return &lockedRows{sqliteRows: rows, c: c, locked: locks, kept: kept}, nil
}

// PrepareContext prepares without the lock: database/sql prepares only when asked to (its
// connections have ExecerContext), this project does not ask (the statements the connection
// keeps prepared run through ExecContext and QueryContext, which take the lock), and a
// statement that is prepared, writing outside a transaction, waits in SQLite's busy handler
// as before.
func (c *lockedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.conn.PrepareContext(ctx, query)
}

func (c *lockedConn) Prepare(query string) (driver.Stmt, error) { return c.conn.Prepare(query) }
func (c *lockedConn) Close() error {
	c.stmts.close()
	return c.conn.Close()
}
func (c *lockedConn) Ping(ctx context.Context) error         { return c.conn.Ping(ctx) }
func (c *lockedConn) ResetSession(ctx context.Context) error { return c.conn.ResetSession(ctx) }
func (c *lockedConn) IsValid() bool                          { return c.conn.IsValid() }

// lockedTx releases the write lock when its transaction ends.
type lockedTx struct {
	tx driver.Tx
	c  *lockedConn
}

func (t *lockedTx) Commit() error {
	defer t.end()
	return t.tx.Commit()
}

func (t *lockedTx) Rollback() error {
	defer t.end()
	return t.tx.Rollback()
}

func (t *lockedTx) end() {
	if t.c.inTx {
		t.c.inTx = false
		t.c.release()
	}
}

// lockedRows releases the write lock when the rows of a writing statement are closed, and
// gives back the kept statement they were read from. It keeps what modernc's rows say of
// their column types (gorm scans by them).
type lockedRows struct {
	sqliteRows
	c      *lockedConn
	locked bool      // the rows hold the write lock
	kept   *keptStmt // nil: run unprepared
	once   sync.Once
}

// sqliteRows is what database/sql uses of modernc's rows.
type sqliteRows interface {
	driver.Rows
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

func (r *lockedRows) Close() error {
	err := r.sqliteRows.Close()
	r.once.Do(func() {
		if r.kept != nil {
			r.c.stmts.give(r.kept)
		}
		if r.locked {
			r.c.release()
		}
	})
	return err
}
