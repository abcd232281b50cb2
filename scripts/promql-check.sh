#!/usr/bin/env bash
# Checks the PromQL of docs/observability.md against a real Prometheus:
# starts the chain (slow partner, checkout, edge: release builds) on
# loopback ports 29000-29081, a Prometheus scraping their /metrics every
# second, sends 60 s of mixed traffic (most requests healthy, one in five
# with a budget too small for pricing's delay: 504s), then runs each query
# of the page through Prometheus' HTTP API and prints its result. Bounded:
# the load stops by itself after 60 s, everything is killed on exit.
#
# Needs: prometheus (Debian's package), curl, python3. Honours
# CARGO_TARGET_DIR.
#
# Usage: scripts/promql-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

command -v prometheus >/dev/null || { echo "promql-check: prometheus not installed (apt-get install prometheus)" >&2; exit 2; }
bin=${CARGO_TARGET_DIR:-target}/release
cargo build -q --release -p edge -p checkout -p slow-partner
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

"$bin/slow-partner" --listen 127.0.0.1:29000 --admin-listen 127.0.0.1:29001 >"$work/partner.log" 2>&1 &
pids+=($!)
"$bin/checkout" --listen 127.0.0.1:29081 \
  --inventory-url 'http://127.0.0.1:29000/inventory?delay=20ms&jitter=10ms' \
  --pricing-url 'http://127.0.0.1:29000/pricing?delay=300ms&jitter=100ms' \
  --recommendations-url 'http://127.0.0.1:29000/recommendations?delay=30ms' >"$work/checkout.log" 2>&1 &
pids+=($!)
"$bin/edge" --listen 127.0.0.1:29080 --checkout-url http://127.0.0.1:29081 >"$work/edge.log" 2>&1 &
pids+=($!)

cat >"$work/prometheus.yml" <<'EOF'
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: edge
    static_configs: [{ targets: ["127.0.0.1:29080"] }]
  - job_name: checkout
    static_configs: [{ targets: ["127.0.0.1:29081"] }]
  - job_name: partner
    static_configs: [{ targets: ["127.0.0.1:29001"] }]
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address=127.0.0.1:29090 >"$work/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -sf http://127.0.0.1:29090/-/ready >/dev/null && break; sleep 0.2; done

echo "== 60 s of load: 40 req/s, one in five with a 250 ms budget (too small for pricing: 504)"
python3 - <<'EOF'
import http.client, threading, time
end = time.time() + 60
def worker(k):
    i = k
    while time.time() < end:
        budget = "250" if i % 5 == 0 else "2000"
        try:
            c = http.client.HTTPConnection("127.0.0.1", 29080, timeout=5)
            c.request("GET", "/checkout", headers={"request-budget-ms": budget})
            c.getresponse().read()
            c.close()
        except OSError:
            pass
        i += 8
        time.sleep(0.2)
threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
for t in threads: t.start()
for t in threads: t.join()
EOF
sleep 3

query() { # TITLE PROMQL
  echo "== $1"
  echo "   $2"
  curl -s --get http://127.0.0.1:29090/api/v1/query --data-urlencode "query=$2" |
    python3 -c 'import json,sys
d=json.load(sys.stdin)
assert d["status"]=="success", d
r=d["data"]["result"]
if not r: print("   (no series)")
for s in r: print("   ", {k:v for k,v in s["metric"].items() if k!="__name__"}, s["value"][1])'
}
# The queries of docs/observability.md, in its order.
query "1. error rate of /checkout, per service" \
  'sum by (job) (rate(http_server_request_duration_seconds_count{http_route="/checkout",http_response_status_code=~"5.."}[1m])) / sum by (job) (rate(http_server_request_duration_seconds_count{http_route="/checkout"}[1m]))'
query "2a. 504 rate of /checkout, per service" \
  'sum by (job) (rate(http_server_request_duration_seconds_count{http_route="/checkout",http_response_status_code="504"}[1m]))'
query "2b. calls not made for want of budget or a permit, by dependency" \
  'sum by (dependency) (rate(budget_below_floor_total[1m])) + sum by (dependency) (rate(budget_no_permit_total[1m]))'
query "2c. attempts cut by the budget or the dependency's 504, by dependency" \
  'sum by (dependency) (rate(http_client_request_duration_seconds_count{outcome=~"timeout|504"}[1m]))'
query "3. p99 latency of /checkout, per service" \
  'histogram_quantile(0.99, sum by (job, le) (rate(http_server_request_duration_seconds_bucket{http_route="/checkout"}[1m])))'
query "4. share of the budget used, per service" \
  'sum by (job) (rate(http_server_request_duration_seconds_sum{http_route="/checkout"}[1m])) / sum by (job) (rate(budget_ingress_seconds_sum[1m]))'
query "5. sheds by reason" \
  'label_replace(sum(rate(budget_shed_total[1m])), "reason", "ingress_floor", "", "") or label_replace(sum(rate(budget_overloaded_total[1m])), "reason", "in_flight_limit", "", "") or label_replace(sum(rate(budget_below_floor_total[1m])), "reason", "dependency_floor", "", "") or sum by (reason) (rate(budget_no_permit_total[1m]))'
query "the partner's late work" 'rate(partner_late_total[1m])'
