# Shared by the daemon benchmarks: a work directory removed on exit (with the daemon in it stopped), a project
# of 1,000 one-card steps, and a simulated daemon on it.
# Sourcing sets WORK; make_many_steps DIR EXPECTED_MINUTES; start_daemon DIR TIME_SCALE (sets PID and PORT).
WORK=$(mktemp -d)
cleanup() { [[ -n "${PID:-}" ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
make_many_steps() {
  mkdir -p "$1/jobs" "$1/toolchain"
  cp "$(dirname "${BASH_SOURCE[0]}")/../toolchain/versions.env" "$1/toolchain/"
  { echo "name: many"; echo "parallel: true"; echo "steps:"
    for i in $(seq 1 1000); do echo "  - {name: s$i, devices: 1, expected-minutes: $2, run: 'true $i'}"; done; } > "$1/jobs/many.yml"
}
start_daemon() {
  "$BIN" serve --root "$1" --simulate --time-scale "$2" --listen 127.0.0.1:0 --devices 8 \
    --state-dir "$1/state" --lock-dir "$1/locks" > "$1/serve.out" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do grep -q "listening on" "$1/serve.out" && break; sleep 0.05; done
  PORT=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$1/serve.out" | head -1)
}
