#!/usr/bin/env bash
# Flame graphs of ingest, the vault and acquittal during bench/pipeline.py's end-to-end burst.
#
#   bench/profiles/record.sh OUT_DIR [pipeline.py options...]    e.g. --baseline 7bf8649
#
# Starts the pipeline bench with --profile (which prints each child's pid), waits for the burst,
# records each service for 10 s with py-spy (an SVG flame graph and the folded stacks), then stops
# the bench. With --baseline REV the services recorded are REV's (the bench measures REV first).
# Needs py-spy (pip install py-spy) and permission to read other processes (root, or ptrace_scope 0).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
out="$1"; shift
mkdir -p "$out"
cd "$here"
.venv/bin/python bench/pipeline.py --profile --events 30000 --seconds 3 --stress-seconds 2 \
    --sealing-lot-events 1000 "$@" > "$out/bench.txt" 2>&1 &
bench=$!
trap 'kill -TERM $bench 2>/dev/null || true' EXIT
until grep -qs "end to end: publishing" "$out/bench.txt"; do
    kill -0 $bench 2>/dev/null || { echo "the bench stopped: see $out/bench.txt" >&2; exit 1; }
    sleep 0.2
done
recorders=()
for service in ingest vault acquittal; do
    pid=$(grep -oP "^\s+$service\s+pid \K\d+" "$out/bench.txt" | head -1)
    .venv/bin/py-spy record --pid "$pid" --duration 10 --rate 200 --nonblocking -o "$out/$service.svg" >/dev/null 2>&1 &
    recorders+=($!)
    .venv/bin/py-spy record --pid "$pid" --duration 10 --rate 200 --nonblocking --format raw -o "$out/$service.folded" >/dev/null 2>&1 &
    recorders+=($!)
done
wait "${recorders[@]}"
gzip -9 -f "$out"/*.folded
