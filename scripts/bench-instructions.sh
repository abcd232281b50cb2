#!/usr/bin/env bash
# Instructions per request of each variant of examples/src/bin/layer-bench-server.rs
# (plain axum, + tower-http TimeoutLayer, + BudgetLayer, + the Budget
# extractor, a raw reqwest call, a BudgetClient call), counted by callgrind:
# for each variant the server runs under valgrind twice, for the same fixed
# lifetime, once answering N requests and once 3N, all on one keep-alive
# connection with `request-budget-ms: 1500`; per request = (Ir(3N) - Ir(N)) / 2N.
# Start-up, shut-down and idle timer ticks are the same in both runs and
# cancel out. Instruction counts do not depend on how busy the machine is,
# so this is the regression gate (BENCHMARKS.md, "The server layer's cost").
#
# Needs valgrind and python3. Honours CARGO_TARGET_DIR.
#
# Usage: scripts/bench-instructions.sh [N] [VARIANT...]   (N default 1000)
#   VARIANT: plain timeout budget extractor raw-call budget-call timeout-outer
#            budget-outer header-floor identity header-floor-outer
#            (default: all). The -outer three wrap the whole Router rather than
#            each route, as ServiceBuilder users write it; header-floor is the
#            least any budget layer does (read the budget header, write one
#            Server-Timing); identity is tower's no-op layer, what
#            Router::layer costs for any layer.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
shift || true
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(plain timeout budget extractor raw-call budget-call timeout-outer budget-outer header-floor identity header-floor-outer)
command -v valgrind >/dev/null || { echo "bench-instructions: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
cargo build -q --release -p budget-examples --bin layer-bench-server
bin=${CARGO_TARGET_DIR:-target}/release/layer-bench-server
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lifetime=$(( 12 + n * 3 / 250 ))

port_of() {
  case $1 in
    plain) echo 18081 ;; timeout) echo 18082 ;; budget) echo 18083 ;;
    extractor) echo 18084 ;; raw-call) echo 18085 ;; budget-call) echo 18086 ;;
    header-floor) echo 18090 ;; identity) echo 18091 ;; header-floor-outer) echo 18092 ;;
    timeout-outer) echo 18087 ;; budget-outer) echo 18088 ;;
    *) echo "bench-instructions: unknown variant $1" >&2; exit 2 ;;
  esac
}

# Ir of one run: the server under callgrind for `lifetime` s, REQUESTS
# requests to PORT on one connection once it answers.
run() { # PORT REQUESTS
  local out="$work/cg.$1.$2"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$lifetime" >/dev/null 2>"$work/vg.log" &
  local vg=$!
  python3 - "$1" "$2" <<'EOF'
import http.client, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
deadline = time.time() + 60
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/", headers={"request-budget-ms": "1500"})
        c.getresponse().read()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("server did not answer")
        time.sleep(0.2)
for _ in range(n - 1):
    c.request("GET", "/", headers={"request-budget-ms": "1500"})
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
EOF
  wait "$vg" || true
  awk '/^summary:/ {print $2}' "$out"
}

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); N = $n; lifetime ${lifetime}s per run"
declare -A per
for v in "${variants[@]}"; do
  port=$(port_of "$v")
  one=$(run "$port" "$n")
  three=$(run "$port" $(( 3 * n )))
  per[$v]=$(( (three - one) / (2 * n) ))
  printf '%-12s %8d instructions per request\n' "$v" "${per[$v]}"
done
if [ -n "${per[plain]:-}" ]; then
  for v in "${variants[@]}"; do
    [ "$v" = plain ] && continue
    printf '%-12s %+8d over plain\n' "$v" $(( per[$v] - per[plain] ))
  done
fi
