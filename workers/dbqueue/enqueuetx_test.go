package dbqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"gorm.io/gorm"

	"svc/workers"
	"svc/workers/dbqueue"
)

// EnqueueTx's job commits or rolls back with its transaction; a pending duplicate is
// ErrDuplicate without aborting the transaction (Postgres aborts one at its first error).
func TestEnqueueTx(t *testing.T) {
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		q, err := dbqueue.New(db, dbqueue.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		task := func(id string) workers.Task { return workers.Task{Type: "fire", ID: id, Payload: []byte(id)} }
		rollback := errors.New("rollback")
		err = db.Transaction(func(tx *gorm.DB) error {
			if err := q.EnqueueTx(ctx, tx, task("a")); err != nil {
				return err
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatal(err)
		}
		err = db.Transaction(func(tx *gorm.DB) error {
			if err := q.EnqueueTx(ctx, tx, task("a")); err != nil {
				return err
			}
			if err := q.EnqueueTx(ctx, tx, task("a")); !errors.Is(err, workers.ErrDuplicate) {
				t.Errorf("a second EnqueueTx of a = %v, want ErrDuplicate", err)
			}
			dup, err := q.EnqueueManyTx(ctx, tx, []workers.Task{task("b"), task("a"), task("b")}, workers.MaxRetry(3))
			if err == nil && !slices.Equal(dup, []bool{false, true, true}) {
				t.Errorf("EnqueueManyTx(b, a, b) duplicates %v, want [false true true]", dup)
			}
			return err
		})
		if err != nil {
			t.Fatalf("transaction after a duplicate: %v", err)
		}
		q.Wake()
		var keys []string
		if err := db.Table("jobs").Where("state = 'queued'").Order("unique_key").Pluck("unique_key", &keys).Error; err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 || keys[0] != "a" || keys[1] != "b" {
			t.Errorf("queued jobs %v, want [a b]", keys)
		}
		if err := q.Enqueue(ctx, task("b")); !errors.Is(err, workers.ErrDuplicate) {
			t.Errorf("Enqueue of b after EnqueueTx = %v, want ErrDuplicate", err)
		}
	})
}
