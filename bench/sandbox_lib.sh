# Shared by the benchmarks that can run their steps as sandbox users (SANDBOX=on, as root). Usage, after BIN
# and WORK are set:
#   sandbox_yaml DIR      prints DIR's runner.yml lines ("sandbox: off" unless SANDBOX=on)
#   sandbox_setup DIR...  after those runner.yml files are written: the cards' stand-in files in each DIR (each
#                         step is given its own by ACL, as on a real host), the dirs opened to the users, and
#                         the users made with `pto-runner sandbox setup` (a prefix of their own)
#   sandbox_remove        in the EXIT trap: the users removed again
SANDBOX_PREFIX="ptbench$$-"
sandbox_yaml() {
  if [ "${SANDBOX:-off}" = on ]; then
    printf 'sandbox:\n  users: %s\n  count: 2\ndevices:\n  card-files: %s/dev/davinci{id}\n' "$SANDBOX_PREFIX" "$1"
  else
    echo "sandbox: off"
  fi
}
sandbox_setup() {
  [ "${SANDBOX:-off}" = on ] || return 0
  [ "$(id -u)" = 0 ] || { echo "SANDBOX=on needs root" >&2; exit 2; }
  chmod 0755 "$WORK"
  for dir in "$@"; do
    mkdir -p "$dir/dev"
    for i in $(seq 0 7); do : > "$dir/dev/davinci$i"; chmod 0600 "$dir/dev/davinci$i"; done
    chmod 0755 "$dir"
  done
  SANDBOX_ROOT="$1"
  "$BIN" --root "$SANDBOX_ROOT" sandbox setup > /dev/null
}
sandbox_remove() {
  if [ -n "${SANDBOX_ROOT:-}" ]; then "$BIN" --root "$SANDBOX_ROOT" sandbox remove > /dev/null 2>&1 || true; fi
}
