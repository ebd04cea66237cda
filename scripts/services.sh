#!/usr/bin/env bash
# Makes sure the services the tests talk to are up: Postgres and Redis (started when installed but
# stopped, with the machine's own start commands) and an S3 server binary (installed once, cached
# in $(go env GOPATH)/bin). Fails loudly, naming what is missing.
set -euo pipefail

fail() { echo "services: $*" >&2; exit 1; }

pg_url="${SVC_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
if ! pg_isready -q -d "$pg_url" 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
    for _ in $(seq 1 30); do pg_isready -q -d "$pg_url" && break; sleep 0.5; done
  fi
  pg_isready -q -d "$pg_url" || fail "PostgreSQL is not reachable at $pg_url and could not be started (install postgresql, or set SVC_TEST_DATABASE_URL)"
fi
# The test database must exist (tests create their own databases beside it).
if ! psql "$pg_url" -Atqc 'select 1' >/dev/null 2>&1; then
  fail "cannot connect to $pg_url (does database 'test' exist? createdb -h 127.0.0.1 -U postgres test)"
fi

redis_url="${SVC_TEST_REDIS_URL:-redis://127.0.0.1:6379/0}"
if ! redis-cli -u "$redis_url" ping >/dev/null 2>&1; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "services: starting Redis"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
    for _ in $(seq 1 30); do redis-cli -u "$redis_url" ping >/dev/null 2>&1 && break; sleep 0.3; done
  fi
  redis-cli -u "$redis_url" ping >/dev/null 2>&1 || fail "Redis is not reachable at $redis_url and could not be started (install redis-server, or set SVC_TEST_REDIS_URL)"
fi

if [ -z "${SVC_TEST_S3_ENDPOINT:-}" ]; then
  "$(dirname "$0")/s3server.sh" >/dev/null || fail "could not install the S3 server (scripts/s3server.sh)"
fi
# The console's browser tests (cmd/svc console_browser_test.go) drive Debian's chromium.
chromium_bin="${SVC_TEST_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium_bin" ]; then
  echo "services: installing chromium (the console's browser tests)"
  if command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null \
      || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null; } || true
  fi
  [ -x "$chromium_bin" ] || fail "chromium is not at $chromium_bin and could not be installed (apt-get install -y chromium, or set SVC_TEST_CHROMIUM)"
fi
# The AI SDK resume test (runner/runtime aisdk_resume_test.go) drives `ai` from npm with Node.js.
aisdk_dir="${SVC_TEST_AISDK_DIR:-$HOME/.cache/svc-aisdk}"
if [ ! -f "$aisdk_dir/node_modules/ai/package.json" ]; then
  command -v npm >/dev/null 2>&1 || fail "npm is not installed (the AI SDK test needs Node.js and npm)"
  echo "services: installing the AI SDK (npm ai@5) in $aisdk_dir"
  mkdir -p "$aisdk_dir"
  npm install --prefix "$aisdk_dir" --no-audit --no-fund --loglevel=error ai@5 >/dev/null \
    || fail "could not install the AI SDK with npm in $aisdk_dir (or set SVC_TEST_AISDK_DIR to a directory holding node_modules/ai)"
fi
echo "services: postgres, redis, s3, chromium and the AI SDK ready"
