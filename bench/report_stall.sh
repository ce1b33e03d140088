#!/usr/bin/env bash
# Issue 47: does a step's test report stall the daemon? Two steps end, one after the other, while a client asks
# GET /healthz every 5 ms on a fresh connection:
#  - sparse: 32 sparse files of 63 MiB (2 GiB, each under the 64 MiB per-file cap), refused whole by
#    tests.max-report-bytes (256 MiB) before a byte is read;
# The probe runs from just before the submission to the run's end, at least 3 s.
#  - read: ~230 MiB in 8 JUnit files of 1,000 test cases each (30 KB of captured output per case), read one
#    file at a time on the daemon's worker pool, then judged on its engine thread.
# Baselines in the same script: the same probe on the same daemon while idle, and while a plain step (the same
# command, no `tests:`) starts and ends. Target: p99 within 2x of idle; the fair comparison is with the plain
# step, whose start and end cost the daemon the same apart from the reports.
# Also printed: the daemon's peak RSS (VmHWM) before and after each.
# Usage: bench/report_stall.sh [build/pto-runner]
set -euo pipefail
BIN=$(realpath "${1:-build/pto-runner}")
source "$(dirname "$0")/daemon_lib.sh"
mkdir -p "$WORK/jobs" "$WORK/toolchain" "$WORK/out"
cp "$(dirname "$0")/../toolchain/versions.env" "$WORK/toolchain/"
printf 'sandbox: off\n' > "$WORK/runner.yml"
printf 'name: plain\nsteps:\n  - name: reports\n    run: "mkdir -p plain && for i in $(seq 1 32); do truncate -s 63M plain/r$i.xml; done"\n' > "$WORK/jobs/plain.yml"
printf 'name: read\nsteps:\n  - name: reports\n    tests: {junit: "out/*.xml"}\n    run: "true"\n' > "$WORK/jobs/read.yml"
printf 'name: sparse\nsteps:\n  - name: reports\n    tests: {junit: "sparse/*.xml"}\n    run: "mkdir -p sparse && for i in $(seq 1 32); do truncate -s 63M sparse/r$i.xml; done"\n' > "$WORK/jobs/sparse.yml"
python3 - "$WORK/out" <<'PY'
import sys
out = sys.argv[1]
trace = "Traceback (most recent call last):\n" + "  File \"t.py\", line 1, in test\n" * 8
for f in range(8):
    with open(f"{out}/r{f}.xml", "w") as w:
        w.write('<?xml version="1.0"?>\n<testsuites><testsuite name="pytest">\n')
        for i in range(1000):
            if i % 10 == 0:
                w.write(f'<testcase classname="tests.st.test_{f}" name="test_case[{i}]" time="0.1"><failure message="boom {i}">{trace}</failure>'
                        f'<system-out>{"x" * 30000}</system-out></testcase>\n')
            else:
                w.write(f'<testcase classname="tests.st.test_{f}" name="test_case[{i}]" time="0.1"><system-out>{"y" * 30000}</system-out></testcase>\n')
        w.write("</testsuite></testsuites>\n")
PY
MB=$(du -sm "$WORK/out" | cut -f1)
"$BIN" serve --root "$WORK" --listen 127.0.0.1:0 --devices 1 --state-dir "$WORK/state" --lock-dir "$WORK/locks" > "$WORK/serve.out" 2>&1 &
PID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/serve.out" && break; sleep 0.05; done
PORT=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/serve.out" | head -1)
cat > "$WORK/probe.py" <<'PY'
import http.client, os, sys, time
port, seconds, stop = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
lat = []
end = time.time() + seconds
while time.time() < end and not os.path.exists(stop):
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/healthz")
    c.getresponse().read()
    c.close()
    lat.append((time.perf_counter() - t) * 1000)
    time.sleep(0.005)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"{len(lat)} {q(0.5):.2f} {q(0.99):.2f} {lat[-1]:.2f}")
PY
hwm() { awk '/VmHWM/ {print int($2/1024)}' "/proc/$PID/status"; }
IDLE=$(python3 "$WORK/probe.py" "$PORT" 3 "$WORK/never")
set -- $IDLE; I_N=$1 I_P50=$2 I_P99=$3
echo "GET /healthz idle (baseline): ${I_N} requests, p50 ${I_P50} ms, p99 ${I_P99} ms"
BASE_P99=""
for job in plain sparse read; do
  BEFORE=$(hwm)
  rm -f "$WORK/done"
  python3 "$WORK/probe.py" "$PORT" 600 "$WORK/done" > "$WORK/busy.txt" &
  PROBE=$!
  sleep 0.2
  ID=$("$BIN" submit --server "http://127.0.0.1:$PORT" --token-file "$WORK/state/token" --job "$job" | sed -n 's/^submitted run \([^:]*\):.*/\1/p')
  T0=$(date +%s.%N)
  while curl -s "http://127.0.0.1:$PORT/api/v1/runs/$ID" | grep -q '"state":"running"'; do sleep 0.05; done
  # At least 3 s of samples, as the idle baseline has (the sparse step's run is over in a moment).
  sleep "$(echo "r = 3 - ($(date +%s.%N) - $T0); if (r < 0) r = 0; r" | bc)"
  touch "$WORK/done"
  wait "$PROBE"
  set -- $(cat "$WORK/busy.txt"); B_N=$1 B_P50=$2 B_P99=$3 B_MAX=$4
  WHAT=$(curl -s "http://127.0.0.1:$PORT/api/v1/runs/$ID" | python3 -c 'import json,sys; s=json.load(sys.stdin)["jobs"][0]["steps"][0]; print(s["state"], "-", (s.get("verdict") or "")[:90])')
  echo "$job: step $WHAT"
  [ -z "$BASE_P99" ] && BASE_P99=$B_P99
  echo "  GET /healthz meanwhile: ${B_N} requests, p50 ${B_P50} ms, p99 ${B_P99} ms, max ${B_MAX} ms; p99 $(echo "scale=2; $B_P99 / $I_P99" | bc)x idle, $(echo "scale=2; $B_P99 / $BASE_P99" | bc)x plain"
  echo "  daemon peak RSS: ${BEFORE} MiB before, $(hwm) MiB after"
done
echo "(read: ${MB} MiB of reports)"
