#!/usr/bin/env bash
# stackgrow.sh: do a chat request's goroutines grow their stacks to 16 KiB?
#
# An open stream costs its turn's goroutine stack: 8 KiB while the deepest call of the turn
# stays under about 7 KiB, else 16 KiB (kept while the turn waits on its model); the request's
# handler goroutine, which opens the turn, counts at a burst of new streams. This builds svc
# with a copy of the Go toolchain whose runtime prints the call stack of every growth to 16 KiB
# of a goroutine started by runner/park (a streamed turn) or net/http (a request's handler),
# opens streams against svcbench's fake model, and prints how many grew and the first stack of
# each kind. "turn: 0", and for handlers one or two (the first requests fill encoding/json's caches,
# which goes deep once), are what we want.
#
#   scripts/stackgrow.sh [streams]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cp -a "$(go env GOROOT)" "$work/goroot"
python3 - "$work/goroot/src/runtime/stack.go" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
anchor = "\t// The goroutine must be executing in order to call newstack,\n"
patch = '''\tif newsize >= 16384 && oldsize < 16384 {
\t\tif f := findfunc(gp.startpc); f.valid() && (len(funcname(f)) > 15 && funcname(f)[:15] == "svc/runner/park" || len(funcname(f)) > 8 && funcname(f)[:8] == "net/http") {
\t\t\tprint("STACKGROW ", funcname(f)[:8], " used=", gp.stack.hi-gp.sched.sp, " new=", newsize, "\\n")
\t\t\ttraceback(gp.sched.pc, gp.sched.sp, gp.sched.lr, gp)
\t\t\tprint("STACKEND\\n")
\t\t}
\t}
'''
assert s.count(anchor) == 1, "runtime/stack.go changed: update the patch"
open(p, "w").write(s.replace(anchor, patch + anchor))
PY
GOROOT="$work/goroot" "$work/goroot/bin/go" build -o "$work/svc" ./cmd/svc
go build -o "$work/svcbench" ./cmd/svcbench
"$work/svcbench" -fake-openai 127.0.0.1:19981 -hold >"$work/fake.log" 2>&1 &
sleep 1
SVC_DEFAULT_MODEL=openai/gpt-4o-mini OPENAI_BASE_URL=http://127.0.0.1:19981/v1 OPENAI_API_KEY=sk-bench \
  "$work/svc" dev testdata/agents/hello --port 13881 >"$work/svc.log" 2>&1 &
pid=$!
for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:13881/ && break; sleep 0.2; done
"$work/svcbench" -url http://127.0.0.1:13881 -open-streams "$n" -pid "$pid" | tail -1
kill "$pid"; wait "$pid" 2>/dev/null || true
for kind in 'svc/runn turn' 'net/http handler'; do
  set -- $kind
  echo "$2: $(grep -c "^STACKGROW $1" "$work/svc.log" || true)"
  awk -v k="STACKGROW $1" 'index($0, k) == 1 {n++} n == 1' "$work/svc.log" | sed '/STACKEND/q' | grep -v '^\s*/' | cut -c1-140 || true
done
