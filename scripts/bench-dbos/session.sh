#!/bin/sh
# One benchmark session of durable tools (issue 11) against DBOS Transact, alternating the two,
# from the repository's root: sh scripts/bench-dbos/session.sh. Needs the local Postgres
# (make services); CI=1 makes a missing Postgres fail the Postgres sub-benchmarks instead of
# skipping them.
set -eu
export CI=1
(cd scripts/bench-dbos && go build -o "${TMPDIR:-/tmp}/bench-dbos" .)
go test -c -o "${TMPDIR:-/tmp}/runtime.test" ./runner/runtime/
for round in 1 2; do
	echo "== round $round"; uptime
	(cd runner/runtime && "${TMPDIR:-/tmp}/runtime.test" -test.run '^$' -test.bench 'BenchmarkDurableStep$' -test.benchtime 3s)
	(cd runner/runtime && "${TMPDIR:-/tmp}/runtime.test" -test.run '^$' -test.bench 'BenchmarkDurableResume$' -test.benchtime 500x)
	"${TMPDIR:-/tmp}/bench-dbos" -step-ops 30 -resume-ops 500 -waiting 1000
done
uptime
(cd runner/runtime && "${TMPDIR:-/tmp}/runtime.test" -test.run '^$' -test.bench 'BenchmarkParkedRuns$' -test.benchtime 1x)
"${TMPDIR:-/tmp}/bench-dbos" -step-ops 0 -resume-ops 0 -waiting 10000
