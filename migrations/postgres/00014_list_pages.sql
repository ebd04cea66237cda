-- +goose NO TRANSACTION
-- +goose Up
-- Keyset pages of the platform's per-agent lists (registry.Cursor): each list is ordered by
-- (time DESC, id DESC), the id breaking ties between items of the same time, and a page after a
-- cursor asks for (time, id) < (cursor's time, cursor's id). These indexes end in id so that the
-- page is one index range in the list's order on both dialects, with no sort of tied items. Each
-- replaces the index of 00003, 00010 or 00013 that it extends (the same prefix serves the same
-- queries, such as the runtimes' session history).
-- The indexes are built CONCURRENTLY, outside a transaction (NO TRANSACTION), so that a large
-- sessions, feedback or runs table keeps taking writes while they build; IF [NOT] EXISTS makes a
-- migration that stopped half-way safe to run again. (A CONCURRENTLY build that fails leaves an
-- INVALID index of that name: drop it by hand before running the migration again.)
CREATE INDEX CONCURRENTLY IF NOT EXISTS sessions_agent_updated_id ON sessions(agent_id, updated_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS sessions_agent_updated;
CREATE INDEX CONCURRENTLY IF NOT EXISTS feedback_agent_created_id ON feedback(agent_id, created_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS feedback_agent_created;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_agent_started_id ON runs(agent_id, started_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_agent_started;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_agent_user_key_started_id ON runs(agent_id, user_key, started_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_agent_user_key_started;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_agent_screen_started_id ON runs(agent_id, screen, started_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_agent_screen_started;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_deploy_started_id ON runs(deploy_id, started_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_deploy_started;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_deploy_started ON runs(deploy_id, started_at DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_deploy_started_id;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_agent_screen_started ON runs(agent_id, screen, started_at DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_agent_screen_started_id;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_agent_user_key_started ON runs(agent_id, user_key, started_at DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_agent_user_key_started_id;
CREATE INDEX CONCURRENTLY IF NOT EXISTS runs_agent_started ON runs(agent_id, started_at DESC);
DROP INDEX CONCURRENTLY IF EXISTS runs_agent_started_id;
CREATE INDEX CONCURRENTLY IF NOT EXISTS feedback_agent_created ON feedback(agent_id, created_at DESC);
DROP INDEX CONCURRENTLY IF EXISTS feedback_agent_created_id;
CREATE INDEX CONCURRENTLY IF NOT EXISTS sessions_agent_updated ON sessions(agent_id, updated_at DESC);
DROP INDEX CONCURRENTLY IF EXISTS sessions_agent_updated_id;
