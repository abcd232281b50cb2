#!/usr/bin/env bash
# Side-by-side throughput of plain axum, axum + tower-http TimeoutLayer and
# axum + BudgetLayer over real loopback HTTP (wrk, 1 thread, 32 connections),
# alternating the three for ROUNDS rounds of SECS seconds each.
# Usage: scripts/bench-server-layer.sh [ROUNDS] [SECS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; secs=${2:-5}
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)"; exit 2; }
cargo build -q --release -p budget-examples --bin layer-bench-server
total=$(( rounds * 3 * (secs + 1) + 10 ))
"${CARGO_TARGET_DIR:-target}/release/layer-bench-server" "$total" & server=$!
trap 'kill $server 2>/dev/null || true' EXIT
sleep 1
declare -A sum
for r in $(seq "$rounds"); do
  for v in plain:18081 tower-http-timeout:18082 budget-layer:18083; do
    name=${v%%:*}; port=${v##*:}
    rps=$(wrk -t1 -c32 -d"${secs}s" -H 'request-budget-ms: 1500' "http://127.0.0.1:${port}/" | awk '/Requests\/sec/ {print $2}')
    echo "round $r $name $rps req/s"
    sum[$name]=$(echo "${sum[$name]:-0} + $rps" | bc -l)
  done
done
for name in plain tower-http-timeout budget-layer; do
  printf '%-20s mean %10.0f req/s  ratio to plain %.3f\n' "$name" \
    "$(echo "${sum[$name]} / $rounds" | bc -l)" "$(echo "${sum[$name]} / ${sum[plain]}" | bc -l)"
done
