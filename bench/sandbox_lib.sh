# Shared by the benchmarks that can run their steps as sandbox users (SANDBOX=on, as root). Usage, after BIN
# and WORK are set:
#   sandbox_yaml DIR      prints DIR's runner.yml lines ("sandbox: off" unless SANDBOX=on)
#   sandbox_setup DIR...  after those runner.yml files are written: the cards' stand-in files for each DIR (each
#                         step is given its own by ACL, as on a real host), the dirs opened to the users, and
#                         the users made with `pto-runner sandbox setup` (a prefix of their own)
# The stand-ins live on tmpfs (/dev/shm), as the real /dev/davinci* live on devtmpfs: on ext4 each ACL change
# is an xattr block write the runner may wait for, which a real card file never costs.
#   sandbox_remove        in the EXIT trap: the users removed again
SANDBOX_PREFIX="ptbench$$-"
SANDBOX_CARDS="/dev/shm/pto-bench-cards-$$"
sandbox_yaml() {
  if [ "${SANDBOX:-off}" = on ]; then
    printf 'sandbox:\n  users: %s\n  count: 2\ndevices:\n  card-files: %s/%s/davinci{id}\n' "$SANDBOX_PREFIX" "$SANDBOX_CARDS" "$(basename "$1")"
  else
    echo "sandbox: off"
  fi
}
sandbox_setup() {
  [ "${SANDBOX:-off}" = on ] || return 0
  [ "$(id -u)" = 0 ] || { echo "SANDBOX=on needs root" >&2; exit 2; }
  chmod 0755 "$WORK"
  for dir in "$@"; do
    local cards="$SANDBOX_CARDS/$(basename "$dir")"
    mkdir -p "$cards"
    for i in $(seq 0 7); do : > "$cards/davinci$i"; chmod 0600 "$cards/davinci$i"; done
    chmod 0755 "$dir"
  done
  SANDBOX_ROOT="$1"
  "$BIN" --root "$SANDBOX_ROOT" sandbox setup > /dev/null
}
sandbox_remove() {
  if [ -n "${SANDBOX_ROOT:-}" ]; then "$BIN" --root "$SANDBOX_ROOT" sandbox remove > /dev/null 2>&1 || true; fi
  rm -rf "$SANDBOX_CARDS"
}
