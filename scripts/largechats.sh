#!/usr/bin/env bash
# largechats.sh: N concurrent chats of about 49 MiB each against `svc up` on a fresh data dir, on
# the echo model; prints the server's peak resident memory (VmHWM), its resident memory after the
# chats, and the data dir's size on disk. Usage:
#   scripts/largechats.sh [SVC_BINARY] [N] [text|attachment]
# text: the message itself is 49 MiB; attachment: two text/plain attachments of 18 MiB each (48 MiB
# of base64). Needs curl, python3 and a free port 127.0.0.1:18480.
set -euo pipefail
svc=${1:-bin/svc}
n=${2:-4}
shape=${3:-text}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
addr=127.0.0.1:18480
"$svc" up --data-dir "$work/data" --addr $addr --log-level error >"$work/up.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -f "$work/data/admin-token" ] && curl -fs http://$addr/health >/dev/null && break; sleep 0.1; done
export SVC_URL=http://$addr SVC_TOKEN=$(cat "$work/data/admin-token")
here=$(cd "$(dirname "$0")/.." && pwd)
"$svc" agents create big >/dev/null
deploy=$("$svc" deploy --agent big --dir "$here/examples/greeter" --env preview --wait 2>&1 | sed -n 's/.*: deployment \(d[a-z0-9]*\), build.*/\1/p')
token=$("$svc" token --agent big)
python3 - "$work" "$shape" "$n" <<'PY'
import base64, json, sys
work, shape, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(1, n + 1):  # every chat sends other content: nothing is shared between them
    fill = chr(ord("a") + i % 26)
    if shape == "text":
        body = {"message": fill * (49 << 20)}
    else:
        data = base64.b64encode(fill.encode() * (18 << 20)).decode()  # 25,165,824 characters, under the per-file limit
        body = {"message": "read these", "attachments": [{"mimeType": "text/plain", "filename": f"big{j}.txt", "data": data[:-8] + base64.b64encode(bytes([i, j, 0, 0, 0, 0])).decode()} for j in (1, 2)]}
    open(f"{work}/body.{i}.json", "w").write(json.dumps(body))
PY
before=$(grep VmRSS /proc/$pid/status | awk '{print $2}')
codes=()
for i in $(seq "$n"); do
  curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -H "Host: $deploy--big.apps.localhost" --data-binary @"$work/body.$i.json" http://$addr/chat/sync >"$work/code.$i" &
done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
sleep 1
hwm=$(grep VmHWM /proc/$pid/status | awk '{print $2}')
after=$(grep VmRSS /proc/$pid/status | awk '{print $2}')
disk=$(du -sk "$work/data" | awk '{print $1}')
echo "shape=$shape chats=$n answers=$(cat "$work"/code.* | sort | uniq -c | tr -s ' ' | tr '\n' ',') rss_before=$((before/1024))MiB peak=$((hwm/1024))MiB rss_after=$((after/1024))MiB disk=$((disk/1024))MiB"
