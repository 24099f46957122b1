#!/bin/bash
# What squadd holds per delivered message, by call site (docs/performance.md,
# "A 50,000-message burst"). Needs heaptrack and heaptrack_print.
#
#   cargo build --release -p squad-supervisor
#   supervisor/benches/heap/burst.sh [N]            # default 5000 messages
#
# Writes N medium messages (renamed into one session under /dev/shm) while
# squadd runs under heaptrack, waits until each is in its recipient's
# inbox, then kills squadd with SIGKILL so that heaptrack records what was
# still allocated, and prints it grouped by squadd's call sites.
# BIN: the squadd to measure (default target/release/squadd); O: where the
# heaptrack data goes (default a temporary directory).
set -euo pipefail
N=${1:-5000}
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$here/../../../target/release/squadd}
O=${O:-$(mktemp -d)}
R=$(mktemp -d /dev/shm/squad-heap.XXXXXX)
trap 'rm -rf "$R"' EXIT
D=$R/.squad/sessions/20240115T100000Z-burst
mkdir -p "$D"
printf 'session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n' >"$D/session-status.md"
for a in alice bob carol; do
  printf 'meta:\n  task_id: task_%s\n  agent: %s\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\n' "$a" "$a" >"$D/role-plan-$a-task_$a.md"
done
rm -f "$O"/heaptrack.*
heaptrack -o "$O/heaptrack.out" "$BIN" --root "$R" --log warn >/dev/null 2>&1 &
sleep 3
python3 - "$D" "$N" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    to = ["bob", "carol"][i % 2]
    mid = f"msg_b{i:06}"
    staging = os.path.join(d, f".{mid}.partial")
    with open(staging, "w") as f:
        f.write(f"meta:\n  message_id: {mid}\n  from_agent: alice\n  to_agent: {to}\n"
                f"  created_at: 2024-01-15T{10 + (i // 60) % 10:02}:{i % 60:02}:00Z\n"
                f"  priority: medium\ntype: notification\nsubject: s\nmessage: m\n")
    os.rename(staging, os.path.join(d, f"role-comm-alice-to-{to}-{mid}.md"))
PY
while [ "$(ls "$D/inbox/bob/new" "$D/inbox/carol/new" 2>/dev/null | wc -l)" -lt "$N" ]; do sleep 1; done
# Past squadd's trim after a burst (2 s).
sleep 8
pkill -KILL -f "squadd --root $R" || true
{ wait; } 2>/dev/null || true
python3 "$here/top.py" "$O" "$N"
