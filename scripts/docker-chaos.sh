#!/usr/bin/env bash
# The chaos demos of the budget chain in docker compose: builds the images
# (scripts/docker-build.sh, then compose build), brings the chain up, breaks
# the slow partner in several ways, sends a fixed number of requests through
# edge for each, prints the budget table (edge's Server-Timing header) and
# checks that every answer came within its budget with the status docs/contract.md §3 gives.
# Tears everything down at the end, whatever happened. Exit code: 0 when every
# check passed, 1 when one failed, 2 on a usage or setup error.
#
# Usage: scripts/docker-chaos.sh [--ci] [--no-build] [--keep-images]
#                                [--requests N] [SCENARIO...]
#   SCENARIO: healthy pause stop disconnect blackhole hang ratelimit grpc replicas
#             db-locked db-paused streams envoy
#             (default: all of them; the db-* ones need the host's psql,
#             which Debian's postgresql package brings; healthy always runs first)
#   --ci           3 requests a scenario instead of 4 (what .ci/run runs)
#   --no-build     use the binaries already in docker/bin/
#   --keep-images  leave the built images (containers and networks still go)
# Environment: CHAOS_EDGE_PORT (8080), CHAOS_ADMIN_PORT (9001), CHAOS_PG_PORT (15432),
#   CHAOS_TOLERANCE_MS (250: the slack over the budget for docker's port
#   proxy and curl), CHAOS_TIME_LIMIT (600 s for the run, builds excluded),
#   COMPOSE_PROJECT_NAME (budget-chaos), CHAOS_ENVOY_CHECKOUT_ADMIN_PORT (9902) and
#   CHAOS_ENVOY_PARTNER_ADMIN_PORT (9903): the Envoys' admin ports of the envoy scenario.
set -euo pipefail
cd "$(dirname "$0")/.."

requests=4 build=true keep_images=false scenarios=()
while (($#)); do
  case $1 in
    --ci) requests=3; shift ;;
    --no-build) build=false; shift ;;
    --keep-images) keep_images=true; shift ;;
    --requests) requests=${2:?--requests needs a number}; shift 2 ;;
    healthy | pause | stop | disconnect | blackhole | hang | ratelimit | grpc | replicas | db-locked | db-paused | streams | envoy)
      scenarios+=("$1"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "docker-chaos: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
if ((${#scenarios[@]} == 0)); then
  scenarios=(pause stop disconnect blackhole hang ratelimit grpc replicas db-locked db-paused streams envoy)
fi

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-budget-chaos}
edge_port=${CHAOS_EDGE_PORT:-8080}
admin_port=${CHAOS_ADMIN_PORT:-9001}
pg_port=${CHAOS_PG_PORT:-15432}
tolerance_ms=${CHAOS_TOLERANCE_MS:-250}
time_limit=${CHAOS_TIME_LIMIT:-600}
edge="http://127.0.0.1:$edge_port"
admin="http://127.0.0.1:$admin_port"

if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
  compose_cmd=(docker-compose)
else
  echo "docker-chaos: neither 'docker compose' nor 'docker-compose' is installed" >&2
  exit 2
fi
# Every command sees the `replicas` and `envoy` profiles' services (their
# scenarios start them; build builds them; down removes them).
compose() { "${compose_cmd[@]}" --profile replicas --profile envoy "$@"; }
docker info >/dev/null 2>&1 || { echo "docker-chaos: no docker engine answers" >&2; exit 2; }
# The db-* scenarios look at the database from the host: the postgres image
# has no shell, so no psql runs inside it.
if [[ " ${scenarios[*]} " == *" db-"* ]] && ! command -v psql >/dev/null; then
  echo "docker-chaos: the db-* scenarios need psql on the host (postgresql-client)" >&2
  exit 2
fi

# --- cleanup: always, on any exit -------------------------------------------
passed=0 failed=0 finished=false run_start=$SECONDS
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  echo "== cleanup: compose down (containers, network$($keep_images || echo ', images'))"
  compose unpause slow-partner >/dev/null 2>&1 || true
  compose unpause postgres >/dev/null 2>&1 || true
  [[ -n ${lock_pid:-} ]] && kill "$lock_pid" 2>/dev/null
  stop_followers
  compose unpause slow-partner-2 checkout-2 >/dev/null 2>&1 || true
  local rmi=(--rmi local)
  $keep_images && rmi=()
  timeout 120 "${compose_cmd[@]}" --profile replicas --profile envoy down -v --remove-orphans -t 2 "${rmi[@]}" >"$work/down.log" 2>&1 ||
    { echo "   compose down failed:"; sed 's/^/   /' "$work/down.log"; }
  docker image prune -f --filter label=org.budget.demo=chaos >/dev/null 2>&1 || true
  rm -rf "$work"
  # An aborted run counts as a failure even when no check had failed yet.
  if ! $finished && ((rc != 0 && failed == 0)); then failed=1; fi
  echo "docker-chaos: $passed passed, $failed failed"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
work=$(mktemp -d)

# --- checks and output --------------------------------------------------------
check() { # OK(true|false) MESSAGE
  if "$1"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "   FAIL: $2"
  fi
}
over_time() {
  if ((SECONDS - run_start > time_limit)); then
    echo "docker-chaos: over the time limit of $time_limit s (builds not counted)" >&2
    exit 1
  fi
}

# The Server-Timing header of a saved response head, one entry a line:
# "name<TAB>dur<TAB>desc".
server_timing() { # HEADERS_FILE
  tr -d '\r' <"$1" | sed -n 's/^[Ss]erver-[Tt]iming: *//p' | awk '
    { s = s (s == "" ? "" : ",") $0 }
    END {
      n = 0; cur = ""; q = 0
      for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\"") q = !q
        if (c == "," && !q) { part[++n] = cur; cur = "" } else cur = cur c
      }
      if (cur != "") part[++n] = cur
      for (k = 1; k <= n; k++) {
        m = split(part[k], f, ";"); name = f[1]; gsub(/^ +| +$/, "", name)
        dur = ""; desc = ""
        for (j = 2; j <= m; j++) {
          kv = f[j]; gsub(/^ +| +$/, "", kv)
          if (kv ~ /^dur=/) dur = substr(kv, 5)
          if (kv ~ /^desc=/) { desc = substr(kv, 6); gsub(/^"|"$/, "", desc) }
        }
        printf "%s\t%s\t%s\n", name, dur, desc
      }
    }'
}
table() { # HEADERS_FILE
  server_timing "$1" | awk -F'\t' '
    BEGIN { printf "   %-26s %8s  %s\n", "step", "ms", "note" }
    { line = sprintf("   %-26s %8s  %s", $1, ($2 == "" ? "" : sprintf("%.0f", $2)), $3); sub(/ +$/, "", line); print line }'
}
compact() { # HEADERS_FILE
  server_timing "$1" | awk -F'\t' '
    { printf "%s%s%s%s", (NR > 1 ? ", " : ""), $1, ($2 == "" ? "" : sprintf(" %.0f", $2)), ($3 == "" ? "" : " " $3) }'
}
header() { # HEADERS_FILE NAME
  tr -d '\r' <"$1" | awk -v h="$(tr '[:upper:]' '[:lower:]' <<<"$2")" '
    { split($0, kv, ": "); if (tolower(kv[1]) == h) { sub(/^[^:]*: */, ""); print; exit } }'
}

# One request through edge: sets status, ms, and leaves the head in $work/h
# and the body in $work/b.
request() { # BUDGET_MS REQUEST_ID
  local out
  out=$(curl -sS -o "$work/b" -D "$work/h" --max-time $((($1 + 5000) / 1000)) \
    -H "request-budget-ms: $1" -H "x-request-id: $2" \
    -w '%{http_code} %{time_total}' "$edge/checkout" 2>"$work/curl.err") || true
  status=${out%% *}
  ms=$(awk -v t="${out##* }" 'BEGIN { printf "%d", t * 1000 }')
  [[ -n "$status" && "$status" != 000 ]] || { status=000; ms=-1; }
}

# Sends `requests` requests with BUDGET_MS and checks each: status EXPECTED
# (one status, or several as `504|503`), time within the budget + tolerance,
# Retry-After on a 429/503. When `after_request` names a function, it runs
# after each request (with status and ms set) for the scenario's own checks.
scenario() { # NAME BUDGET_MS EXPECTED
  local name=$1 budget=$2 expected=$3 i detail retry_after
  for ((i = 1; i <= requests; i++)); do
    over_time
    request "$budget" "chaos-$name-$i"
    retry_after=$(header "$work/h" retry-after)
    printf '   #%d GET /checkout (request-budget-ms: %d) -> %s in %d ms%s\n' \
      "$i" "$budget" "$status" "$ms" "${retry_after:+ (Retry-After: $retry_after)}"
    if ((i == 1)); then
      detail=$(grep -o '"detail":"[^"]*"' "$work/b" | head -1 | sed 's/^"detail":"//; s/"$//') || true
      [[ -n "$detail" ]] && echo "      problem: $detail"
      table "$work/h" | sed 's/^/   /'
    else
      echo "      $(compact "$work/h")"
    fi
    check "$([[ "|$expected|" == *"|$status|"* ]] && echo true || echo false)" \
      "$name #$i: status $status, expected $expected ($(cat "$work/curl.err" 2>/dev/null))"
    check "$( ((ms >= 0 && ms <= budget + tolerance_ms)) && echo true || echo false)" \
      "$name #$i: $ms ms, over the budget $budget ms + $tolerance_ms ms"
    if [[ ("$status" == 429 || "$status" == 503) && "|$expected|" == *"|$status|"* ]]; then
      check "$([[ -n "$retry_after" ]] && echo true || echo false)" "$name #$i: $status without Retry-After"
    fi
    [[ -n ${after_request:-} ]] && "$after_request" "$name #$i"
  done
  return 0
}

wait_healthy() { # waits until edge answers 200 with the whole chain healthy
  local deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    request 1500 "chaos-ready-$SECONDS"
    [[ "$status" == 200 ]] && return 0
    sleep 0.5
  done
  echo "docker-chaos: the chain did not become healthy in 60 s (last status $status)" >&2
  compose ps >&2 || true
  compose logs --tail 20 >&2 || true
  exit 1
}
recovered() { # after a scenario: the chain answers 200 again
  local deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    request 1500 "chaos-recover-$SECONDS"
    [[ "$status" == 200 ]] && break
    sleep 0.5
  done
  echo "   recovered: $status"
  check "$([[ "$status" == 200 ]] && echo true || echo false)" "the chain did not recover: $status"
}
partner_container() { compose ps -q slow-partner; }

# psql on the host against postgres's published port (the image has no
# shell); unaligned, tuples only, bounded in time.
pg() { PGCONNECT_TIMEOUT=3 timeout 10 psql -X -q -A -t -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
# The db-* scenarios need the `stock` table checkout creates on start and
# at least one row in it. Says why not and fails the scenario otherwise.
stock_ready() { # NAME
  local rows
  if ! pg -c 'select 1' >/dev/null 2>"$work/pg.err"; then
    echo "   postgres does not answer on 127.0.0.1:$pg_port: $(head -1 "$work/pg.err")"
    check false "$1: postgres does not answer"
    return 1
  fi
  if [[ "$(pg -c "select to_regclass('stock') is not null")" != t ]]; then
    echo "   no table 'stock': this checkout has no database step (it ignores DATABASE_URL)"
    check false "$1: checkout did not create the stock table"
    return 1
  fi
  rows=$(pg -c 'select count(*) from stock')
  if ((rows == 0)); then
    echo "   the table 'stock' is empty: there is no hot row to lock"
    check false "$1: stock has no rows"
    return 1
  fi
  echo "   stock: $rows rows"
}
# After a 504: about 100 ms later no `update stock` may still run on the
# server (checkout cancelled its statement, it did not leave it queued on
# the lock).
no_update_left() { # LABEL
  local left
  [[ "$status" == 504 ]] || return 0
  sleep 0.1
  left=$(pg -c "select count(*) from pg_stat_activity where state = 'active'
    and query ilike '%update stock%' and pid <> pg_backend_pid()") || left="?"
  echo "      100 ms later, update stock statements still active: $left"
  check "$([[ "$left" == 0 ]] && echo true || echo false)" "$1: $left update stock statements still active 100 ms after the 504"
}
healthy_within() { # SERVICE SECONDS: waits for its container's healthcheck
  local deadline=$((SECONDS + $2))
  until [[ "$(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q "$1")" 2>/dev/null)" == healthy ]]; do
    ((SECONDS > deadline)) && return 1
    sleep 0.5
  done
}
# The `host:port` a ledger entry says answered (`desc="200 from 172.18.0.5:8081"`),
# for the entry NAME (or its hedge, NAME-hedge: a dependency with replicas
# is hedged by default) of the last response; an attempt its race
# cancelled (`desc="cancelled from ..."`) did not answer.
answered_by() { # NAME
  server_timing "$work/h" | awk -F'\t' -v n="$1" '($1 == n || $1 == n "-hedge") && $3 ~ / from / && $3 !~ /^cancelled/ { sub(/.* from /, "", $3); print $3 }' | tail -1
}
# With replicas: REQUESTS requests with BUDGET_MS, each 200 (or, with
# ALLOW_504, a 504 from a replica that stopped answering before the
# balancer learned it) within the budget, and every 200's ledger naming
# the checkout and the partner replica that answered.
replica_round() { # NAME BUDGET_MS ALLOW_504 MIN_200
  local name=$1 budget=$2 allow=$3 min_ok=$4 i ok=0 via partner
  for ((i = 1; i <= requests; i++)); do
    over_time
    request "$budget" "chaos-$name-$i"
    via=$(answered_by checkout)
    partner=$(answered_by checkout.pricing)
    printf '   #%d -> %s in %d ms; checkout %s, its pricing %s\n' "$i" "$status" "$ms" "${via:-?}" "${partner:-?}"
    ((i == 1)) && table "$work/h" | sed 's/^/   /'
    check "$([[ "$status" == 200 || ($allow == true && "$status" == 504) ]] && echo true || echo false)" \
      "$name #$i: status $status"
    check "$( ((ms >= 0 && ms <= budget + tolerance_ms)) && echo true || echo false)" \
      "$name #$i: $ms ms, over the budget $budget ms + $tolerance_ms ms"
    if [[ "$status" == 200 ]]; then
      ok=$((ok + 1))
      check "$([[ -n "$via" && -n "$partner" ]] && echo true || echo false)" \
        "$name #$i: the ledger does not say which replicas answered"
    fi
  done
  check "$( ((ok >= min_ok)) && echo true || echo false)" "$name: $ok of $requests answered 200, expected at least $min_ok"
}

# Sends up to MAX requests until both checkouts have answered one: each
# has then heard from the partners. An attempt to a partner that stops
# answering is given up after the silence limit of the partners a checkout
# has heard from; a checkout that has heard from none has no limit to go
# by and waits out the budget (docs/architecture.md, "Replicas").
warm_checkouts() { # BUDGET_MS MAX
  local seen="" i via
  for ((i = 1; i <= $2; i++)); do
    over_time
    request "$1" "chaos-replicas-warm-$i"
    via=$(answered_by checkout)
    [[ -n "$via" && " $seen " != *" $via "* ]] && seen="$seen $via"
    if (($(wc -w <<<"$seen") >= 2)); then
      echo "   both checkouts answered within $i requests:$seen"
      return 0
    fi
  done
  check false "replicas: both checkouts answer within $2 requests (answered:${seen:- none})"
}

# --- streams: server-sent events through edge across a partner restart ------
# A follower reads edge's /events with curl, one file per connection, and
# after each end reconnects (0.3 s later) with Last-Event-ID: the id of the
# last complete event it read, as a browser's EventSource does; until
# $work/streams.stop exists. Each connection's start (with the id it sent)
# and end are logged in unix ms.
followers=()
follow_events() { # NAME
  local name=$1 n=0 last="" curl_pid
  while [[ ! -e $work/streams.stop ]]; do
    n=$((n + 1))
    echo "$(date +%s%3N) ${last:-none}" >>"$work/$name.opens"
    curl -sS -f -N --max-time 120 -H 'accept: text/event-stream' ${last:+-H "Last-Event-ID: $last"} \
      "$edge/events?rate=20&retry=300ms" >"$work/$name.$n.sse" 2>>"$work/$name.err" &
    curl_pid=$!
    echo "$curl_pid" >"$work/$name.curl"
    wait "$curl_pid" || true
    echo "$(date +%s%3N)" >>"$work/$name.ends"
    last=$(event_ids "$name" | tail -1)
    sleep 0.3
  done
}
# The ids of the complete events (ended by a blank line) a follower read,
# connection after connection: a cut event's partial lines are not counted.
event_ids() { # NAME
  local k
  for ((k = 1; ; k++)); do
    [[ -e $work/$1.$k.sse ]] || return 0
    awk '/^id: /{ id = substr($0, 5) } /^\r?$/{ if (id != "") print id; id = "" }' "$work/$1.$k.sse"
  done
}
stop_followers() {
  local name
  ((${#followers[@]})) || return 0
  touch "$work/streams.stop"
  for name in "${followers[@]}"; do
    [[ -s $work/$name.curl ]] && kill "$(cat "$work/$name.curl")" 2>/dev/null
  done
  wait "${follower_pids[@]}" 2>/dev/null || true
  followers=()
}
# Waits up to SECONDS until every follower has read at least MIN events.
followers_read() { # MIN SECONDS
  local deadline=$((SECONDS + $2)) name short
  while :; do
    short=""
    for name in "${followers[@]}"; do
      (($(event_ids "$name" | wc -l) >= $1)) || short="$short $name"
    done
    [[ -z $short ]] && return 0
    ((SECONDS > deadline)) && { echo "   fewer than $1 events after $2 s:$short"; return 1; }
    sleep 0.2
  done
}
streams_scenario() {
  local name i before stopped_ms restart_ms end_ms ids dups opened
  follower_pids=()
  rm -f "$work/streams.stop"
  for i in 1 2 3; do
    followers+=("sse$i")
    follow_events "sse$i" &
    follower_pids+=($!)
  done
  if followers_read 10 15; then check true ""; else
    check false "streams: every follower reads 10 events through edge before the restart"
  fi
  restart_ms=$(date +%s%3N)
  before=$(for name in "${followers[@]}"; do event_ids "$name" | tail -1; done | sort -n | tail -1)
  echo "   3 streams open, the furthest at id $before: docker compose stop -t 2 slow-partner, then start"
  compose stop -t 2 slow-partner >/dev/null 2>&1
  stopped_ms=$(date +%s%3N)
  echo "   partner stopped in $((stopped_ms - restart_ms)) ms"
  compose start slow-partner >/dev/null 2>&1
  healthy_within slow-partner 60 || { check false "streams: the partner is not healthy again in 60 s"; }
  # Every stream open at the restart ended (edge ended it) by the time the
  # partner was down, with 2 s to spare: none hangs.
  for name in "${followers[@]}"; do
    end_ms=$(awk -v t="$restart_ms" '$1 >= t { print $1; exit }' "$work/$name.ends" 2>/dev/null) || true
    echo "   $name: its stream ended $((${end_ms:-0} - restart_ms)) ms after the restart began"
    check "$([[ -n $end_ms ]] && ((end_ms <= stopped_ms + 2000)) && echo true || echo false)" \
      "streams: $name's stream did not end within 2 s of the partner's stop (no hang)"
  done
  if followers_read $((before + 20)) 30; then check true ""; else
    check false "streams: every follower reads 20 more events after the restart"
  fi
  stop_followers
  for name in sse1 sse2 sse3; do
    ids=$(event_ids "$name")
    dups=$(sort -n <<<"$ids" | uniq -d | wc -l)
    printf '   %s: %d events, ids %s..%s, %d connections, %d repeated, resumed with Last-Event-ID: %s\n' \
      "$name" "$(wc -l <<<"$ids")" "$(head -1 <<<"$ids")" "$(tail -1 <<<"$ids")" \
      "$(wc -l <"$work/$name.opens")" "$dups" "$(awk '$2 != "none" { printf "%s ", $2 }' "$work/$name.opens")"
    check "$([[ -n $ids && "$(seq 1 "$(tail -1 <<<"$ids")")" == "$ids" ]] && echo true || echo false)" \
      "streams: $name's ids are not 1, 2, ... without a gap or a repeat across the restart"
    check "$(awk '$2 != "none" { found = 1 } END { print (found ? "true" : "false") }' "$work/$name.opens")" \
      "streams: $name never reconnected with Last-Event-ID"
  done
  opened=$(curl -sS --max-time 5 "$admin/admin/streams" | grep -o '"opened_total":[0-9]*' | cut -d: -f2) || true
  echo "   the new partner process saw ${opened:-?} stream openings (the reconnects)"
  check "$([[ -n $opened ]] && ((opened >= 3)) && echo true || echo false)" \
    "streams: the new partner saw ${opened:-no} openings, expected at least 3"
}

# The budgets the partner received for the request REQUEST_ID (its /stats):
# "path budget ms, ...".
partner_budgets() { # REQUEST_ID
  curl -sS --max-time 5 "$admin/stats" 2>/dev/null |
    grep -o "\"$1\":{\"attempts\":[0-9]*,\"calls\":\\[[^]]*\\]" |
    grep -o '"path":"[^"]*","attempt":[0-9]*,"budget_ms":[0-9a-z]*' |
    sed 's/"path":"\([^"]*\)","attempt":[0-9]*,"budget_ms":\(.*\)/\1 \2 ms/' | paste -sd, - | sed 's/,/, /g' || true
}
# Whether every budget of a partner_budgets line is a number of ms <= MAX.
at_most() { # MAX, the line on stdin
  awk -F', ' -v max="$1" '{ for (i = 1; i <= NF; i++) { split($i, f, " "); if (f[2] !~ /^[0-9]+$/ || f[2] > max + 0) bad = 1 } } END { exit bad }'
}

# --- envoy: the chain with an Envoy in front of checkout and of the partner --
envoy_checkout_admin="http://127.0.0.1:${CHAOS_ENVOY_CHECKOUT_ADMIN_PORT:-9902}"
envoy_partner_admin="http://127.0.0.1:${CHAOS_ENVOY_PARTNER_ADMIN_PORT:-9903}"
# After each refusal of the envoy scenarios: its ledger names the call
# that ran out or was refused: one of checkout's (`checkout.inventory 585
# timeout`, or Envoy's own `504` as its answer) or edge's call to checkout
# when that ran out first (`checkout 591 timeout`, not a bare status).
refusal_named() { # LABEL
  local refusal
  [[ "$status" == 200 ]] && return 0
  refusal=$(server_timing "$work/h" | awk -F'\t' '
    ($1 ~ /^checkout\./ && $3 != "" && $3 != "ingress") || ($1 == "checkout" && $3 != "" && $3 !~ /^[0-9][0-9][0-9]$/) {
      printf "%s %.0f %s\n", $1, $2, $3
    }' | paste -sd';' - | sed 's/;/; /g')
  echo "      refused: ${refusal:-(no dependency call in the ledger)}"
  check "$([[ -n "$refusal" ]] && echo true || echo false)" "$1: the ledger of the $status names no refused dependency call"
}
# One counter of an Envoy's cluster (its admin /stats), 0 when absent.
envoy_counter() { # ADMIN_URL CLUSTER COUNTER
  local v
  v=$(curl -sS --max-time 5 -G --data-urlencode "filter=^cluster\.$2\.$3\$" "$1/stats" 2>/dev/null | awk -F': ' '{ print $2; exit }')
  echo "${v:-0}"
}
# envoy-partner's own timeouts so far: per try and of the route.
envoy_timeouts() {
  echo $(($(envoy_counter "$envoy_partner_admin" partner upstream_rq_timeout) +
    $(envoy_counter "$envoy_partner_admin" partner upstream_rq_per_try_timeout)))
}
# An Envoy's counters of its cluster that tell who refused (its admin /stats).
envoy_counters() { # ADMIN_URL CLUSTER
  curl -sS --max-time 5 -G --data-urlencode \
    "filter=^cluster\.$2\.(upstream_rq_(timeout|per_try_timeout|retry|retry_overflow|pending_overflow|[0-9]xx)|outlier_detection\.ejections_enforced_total)\$" \
    "$1/stats" 2>/dev/null |
    sed 's/^cluster\.[^.]*\.//' | paste -sd, - | sed 's/,/, /g'
}
envoy_scenario() {
  local svc budgets before_checkout before_partner crossed_checkout crossed_partner timeouts
  export CHAOS_CHECKOUT_URL='http://envoy-checkout:10000'
  export CHAOS_INVENTORY_URL='http://envoy-partner:10000/inventory?delay=20ms'
  export CHAOS_PRICING_URL='http://envoy-partner:10000/pricing?delay=30ms'
  export CHAOS_RECOMMENDATIONS_URL='http://envoy-partner:10000/recommendations?delay=40ms'
  "${compose_cmd[@]}" --profile envoy up -d >"$work/up-envoy.log" 2>&1 || { cat "$work/up-envoy.log"; exit 1; }
  for svc in envoy-partner checkout envoy-checkout edge; do
    healthy_within "$svc" 60 || { echo "docker-chaos: $svc not healthy in 60 s" >&2; compose ps >&2; exit 1; }
  done
  wait_healthy
  echo "   envoy-checkout, envoy-partner, checkout and edge healthy"
  before_checkout=$(envoy_counter "$envoy_checkout_admin" checkout upstream_rq_total)
  before_partner=$(envoy_counter "$envoy_partner_admin" partner upstream_rq_total)
  scenario envoy-healthy 1500 200
  crossed_checkout=$(($(envoy_counter "$envoy_checkout_admin" checkout upstream_rq_total) - before_checkout))
  crossed_partner=$(($(envoy_counter "$envoy_partner_admin" partner upstream_rq_total) - before_partner))
  echo "   requests through envoy-checkout: $crossed_checkout, through envoy-partner: $crossed_partner (3 calls each)"
  check "$( ((crossed_checkout >= requests && crossed_partner >= 3 * requests)) && echo true || echo false)" \
    "envoy: $crossed_checkout requests crossed envoy-checkout and $crossed_partner envoy-partner for $requests through edge"
  budgets=$(partner_budgets chaos-envoy-healthy-1)
  echo "   budgets the partner received for chaos-envoy-healthy-1: ${budgets:-(not in /stats)}"
  echo "   (envoy-partner's per-try timeout is 300 ms, sent as x-envoy-expected-rq-timeout-ms: the smaller wins)"
  check "$([[ -n "$budgets" ]] && at_most 300 <<<"$budgets" && echo true || echo false)" \
    "envoy: the partner received ${budgets:-no budget}, not at most Envoy's 300 ms per try"
  echo "   the partner hangs (PUT $admin/admin/mode?mode=hang): envoy-partner gives up after 3 tries of"
  echo "   300 ms (about 950 ms). With a 600 ms budget checkout's own deadline comes first: a 504 at"
  echo "   the budget, the ledger naming the call that ran out"
  curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=hang" >/dev/null
  after_request=refusal_named scenario envoy-hang 600 '504|503'
  # Healed in between: else checkout's breaker, open on the silent
  # envoy-partner, would answer the next ones with a fast 503 at once.
  curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=normal" >/dev/null
  recovered
  echo "   hung again, with a 2500 ms budget envoy-partner's timeouts come first: Envoy's own 504"
  echo "   answers checkout's attempts, a finding in the ledger (the call, its 504), not a mystery"
  curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=hang" >/dev/null
  timeouts=$(envoy_timeouts)
  after_request=refusal_named scenario envoy-route-timeout 2500 '504|503|502'
  timeouts=$(($(envoy_timeouts) - timeouts))
  echo "   envoy-partner's own timeouts (per try and route) during it: $timeouts"
  check "$( ((timeouts >= 1)) && echo true || echo false)" "envoy: envoy-partner's timeouts never fired with a 2500 ms budget"
  curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=normal" >/dev/null
  echo "   envoy-partner's counters: $(envoy_counters "$envoy_partner_admin" partner)"
  echo "   envoy-checkout's counters: $(envoy_counters "$envoy_checkout_admin" checkout)"
  unset CHAOS_INVENTORY_URL CHAOS_PRICING_URL CHAOS_RECOMMENDATIONS_URL CHAOS_CHECKOUT_URL
  compose stop -t 2 envoy-checkout envoy-partner >/dev/null 2>&1
  compose up -d --no-deps checkout edge >/dev/null 2>&1
}

# --- the run ----------------------------------------------------------------
echo "budget chaos demos in docker compose (project $COMPOSE_PROJECT_NAME, $("${compose_cmd[@]}" version --short 2>/dev/null || echo compose))"
echo "client (host) -> edge -> checkout -> slow-partner; edge on $edge, partner admin on $admin"

compose down -v --remove-orphans -t 1 >/dev/null 2>&1 || true # leftovers of an interrupted run
if $build; then
  echo "== build: static binaries (scripts/docker-build.sh)"
  t0=$SECONDS
  scripts/docker-build.sh >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
  echo "   $((SECONDS - t0)) s; $(tail -n +2 "$work/build.log" | grep -c '^-' || true) binaries staged in docker/bin/"
fi
for b in edge checkout slow-partner healthcheck; do
  [[ -x docker/bin/$b ]] || { echo "docker-chaos: docker/bin/$b is missing: run scripts/docker-build.sh" >&2; exit 2; }
done
for f in rootfs/usr/lib/postgresql/15/bin/postgres pgdata/var/lib/postgresql/data/PG_VERSION; do
  [[ -e docker/postgres/$f ]] || { echo "docker-chaos: docker/postgres/$f is missing: run scripts/docker-build.sh" >&2; exit 2; }
done
[[ -x docker/envoy/rootfs/usr/local/bin/envoy ]] ||
  { echo "docker-chaos: docker/envoy/rootfs/usr/local/bin/envoy is missing: run scripts/docker-build.sh" >&2; exit 2; }

run_start=$SECONDS
echo "== images: compose build (FROM scratch, nothing pulled)"
t0=$SECONDS
compose build >"$work/compose-build.log" 2>&1 || { tail -40 "$work/compose-build.log"; exit 1; }
echo "   $((SECONDS - t0)) s"

echo "== up"
t0=$SECONDS
"${compose_cmd[@]}" up -d >"$work/up.log" 2>&1 || { cat "$work/up.log"; compose logs --tail 30 || true; exit 1; }
wait_healthy
echo "   chain healthy in $((SECONDS - t0)) s"
network=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}' "$(partner_container)" | awk '{print $1}')

echo
echo "== healthy: every dependency answers within its budget"
echo "   service names resolve inside the network (static glibc, no NSS library):"
if compose exec -T checkout /healthcheck http://slow-partner:9001/healthz >"$work/dns" 2>&1; then
  echo "   checkout -> http://slow-partner:9001/healthz: ok"
  check true ""
else
  echo "   checkout -> http://slow-partner:9001/healthz: $(cat "$work/dns")"
  check false "checkout does not resolve slow-partner"
fi
scenario healthy 1500 200
budgets=$(partner_budgets chaos-healthy-1)
echo "   budgets the partner received for chaos-healthy-1: ${budgets:-(not in /stats)}"

for s in "${scenarios[@]}"; do
  over_time
  echo
  case $s in
    healthy) ;;
    pause)
      echo "== pause: docker compose pause slow-partner (it accepts, never answers: a hang)"
      echo "   checkout's attempts time out at the budget: a 504 in time, not a hung caller"
      compose pause slow-partner >/dev/null 2>&1
      scenario pause 1000 504
      compose unpause slow-partner >/dev/null 2>&1
      recovered
      ;;
    stop)
      echo "== stop: docker compose stop slow-partner (its name no longer resolves)"
      echo "   checkout keeps the addresses it last resolved (a failed lookup keeps the last good set):"
      echo "   its attempts time out at the 250 ms connect cap, a 504 after inventory's 2 attempts"
      compose stop -t 2 slow-partner >/dev/null 2>&1
      scenario stop 1000 504
      compose start slow-partner >/dev/null 2>&1
      recovered
      ;;
    disconnect)
      echo "== disconnect: docker network disconnect $network slow-partner (cut off the network)"
      echo "   pooled connections go silent and new ones find no peer: a 504 within the budget"
      docker network disconnect "$network" "$(partner_container)"
      scenario disconnect 1000 504
      docker network connect --alias slow-partner "$network" "$(partner_container)"
      recovered
      ;;
    blackhole)
      echo "== blackhole: PUT $admin/admin/mode?mode=blackhole (connections are never accepted)"
      echo "   the name still resolves, connects time out at checkout's 250 ms connect cap; the retry fits"
      curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=blackhole" >/dev/null
      scenario blackhole 1000 504
      curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=normal" >/dev/null
      recovered
      ;;
    hang)
      echo "== hang: PUT $admin/admin/mode?mode=hang (accepts, never answers)"
      echo "   the same read timeout as a pause, set through the partner's admin port"
      curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=hang" >/dev/null
      scenario hang 1000 504
      curl -sS --max-time 5 -X PUT "$admin/admin/mode?mode=normal" >/dev/null
      recovered
      ;;
    ratelimit)
      echo "== ratelimit: pricing answers 429 with Retry-After: 30 (checkout restarted with"
      echo "   CHAOS_PRICING_URL=http://slow-partner:9000/pricing?status=429&retry_after=30)"
      echo "   a wait longer than the budget is not slept: the 429 and its Retry-After reach the client at once"
      CHAOS_PRICING_URL='http://slow-partner:9000/pricing?status=429&retry_after=30' \
        compose up -d --no-deps checkout >/dev/null 2>&1
      wait_healthy_checkout=$((SECONDS + 30))
      until [[ "$(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q checkout)")" == healthy ]] ||
        ((SECONDS > wait_healthy_checkout)); do sleep 0.5; done
      scenario ratelimit 2000 429
      compose up -d --no-deps checkout >/dev/null 2>&1
      recovered
      ;;
    grpc)
      echo "== grpc: inventory over gRPC (checkout restarted with"
      echo "   CHAOS_INVENTORY_URL=grpc://slow-partner:9000/inventory?delay=...): the partner's Partner/Call"
      echo "   the budget crosses the hop as grpc-timeout; a gRPC inventory slower than the budget is a 504 in time"
      for delay in 20ms 3s; do
        CHAOS_INVENTORY_URL="grpc://slow-partner:9000/inventory?delay=$delay" \
          compose up -d --no-deps checkout >/dev/null 2>&1
        wait_healthy_checkout=$((SECONDS + 30))
        until [[ "$(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q checkout)")" == healthy ]] ||
          ((SECONDS > wait_healthy_checkout)); do sleep 0.5; done
        if [[ $delay == 20ms ]]; then
          echo "   inventory delay=$delay:"
          scenario grpc-healthy 1500 200
        else
          echo "   inventory delay=$delay:"
          scenario grpc-slow 1000 504
        fi
      done
      compose up -d --no-deps checkout >/dev/null 2>&1
      recovered
      ;;
    db-locked)
      echo "== db-locked: a psql session on the host holds every stock row (begin; select * from stock"
      echo "   for update) while requests with a 500 ms budget go through edge: checkout's update waits on"
      echo "   the lock until its budget is spent, a fast 504, and the statement is cancelled on the server"
      stock_ready db-locked || continue
      # The session stays open, its transaction holding the locks, until
      # the requests are done (about 3 s); `timeout` bounds it whatever happens.
      coproc LOCK { PGAPPNAME=chaos-db-locked timeout 60 psql -X -q -A -t -h 127.0.0.1 -p "$pg_port" \
        -U postgres -d postgres -v ON_ERROR_STOP=1 >"$work/lock.log" 2>&1; }
      lock_pid=$LOCK_PID
      echo 'begin; select count(*) from (select * from stock for update) locked;' >&"${LOCK[1]}"
      held=false
      for _ in $(seq 30); do
        [[ "$(pg -c "select count(*) from pg_stat_activity where application_name = 'chaos-db-locked'
          and state = 'idle in transaction'")" == 1 ]] && { held=true; break; }
        sleep 0.1
      done
      echo "   rows locked: $(head -1 "$work/lock.log")"
      check "$held" "db-locked: the psql session did not take the locks: $(cat "$work/lock.log")"
      if $held; then
        after_request=no_update_left scenario db-locked 500 504
      fi
      printf 'commit;\n\\q\n' >&"${LOCK[1]}"
      wait "$lock_pid" 2>/dev/null || true
      lock_pid=""
      echo "   lock released"
      recovered
      ;;
    db-paused)
      echo "== db-paused: docker compose pause postgres (the kernel accepts, the server never answers)"
      echo "   checkout's statement gets no answer within its budget: a fast 504 (or 503), nothing hangs"
      stock_ready db-paused || continue
      compose pause postgres >/dev/null 2>&1
      scenario db-paused 500 '504|503'
      compose unpause postgres >/dev/null 2>&1
      recovered
      ;;
    streams)
      echo "== streams: 3 server-sent event streams through edge's /events (curl followers that"
      echo "   reconnect with Last-Event-ID), then the partner restarted with them open: each stream"
      echo "   ends (edge ends it, no hang), comes back and resumes without a gap or a repeat"
      streams_scenario
      recovered
      ;;
    envoy)
      echo "== envoy: an Envoy in front of checkout and one in front of the partner (profile envoy,"
      echo "   docker/envoy/*.yaml: route and per-try timeouts, retries with a retry budget, circuit"
      echo "   breakers, outlier detection): edge -> envoy-checkout -> checkout -> envoy-partner -> slow-partner"
      envoy_scenario
      recovered
      ;;
    replicas)
      echo "== replicas: three partners behind the name 'partners', two checkouts behind 'checkouts'"
      echo "   (profile replicas; checkout with CHAOS_*_URL=http://partners:9000/..., edge with"
      echo "   CHAOS_CHECKOUT_URL=http://checkouts:8081): each name resolves to every replica and each"
      echo "   attempt goes to one; the ledger says which answered"
      export CHAOS_INVENTORY_URL='http://partners:9000/inventory?delay=20ms'
      export CHAOS_PRICING_URL='http://partners:9000/pricing?delay=30ms'
      export CHAOS_RECOMMENDATIONS_URL='http://partners:9000/recommendations?delay=40ms'
      export CHAOS_CHECKOUT_URL='http://checkouts:8081'
      "${compose_cmd[@]}" --profile replicas up -d >"$work/up-replicas.log" 2>&1 || { cat "$work/up-replicas.log"; exit 1; }
      for svc in slow-partner-2 slow-partner-3 checkout checkout-2 edge; do
        healthy_within "$svc" 60 || { echo "docker-chaos: $svc not healthy in 60 s" >&2; compose ps >&2; exit 1; }
      done
      wait_healthy
      echo "   all replicas healthy:"
      replica_round replicas-healthy 1500 false "$requests"
      warm_checkouts 1500 20
      echo "   pause slow-partner-2 (it accepts, never answers): an attempt to it is given up after"
      echo "   its silence limit and retried on another partner; then its breaker ejects it"
      compose pause slow-partner-2 >/dev/null 2>&1
      replica_round replicas-partner-paused 1500 false "$requests"
      compose unpause slow-partner-2 >/dev/null 2>&1
      echo "   pause checkout-2: edge makes one attempt (a POST), so a call that went to it is a 504"
      echo "   at its budget; the calls in flight to it make it the costlier choice for the rest"
      compose pause checkout-2 >/dev/null 2>&1
      replica_round replicas-checkout-paused 1500 true $((requests - 1))
      compose unpause checkout-2 >/dev/null 2>&1
      unset CHAOS_INVENTORY_URL CHAOS_PRICING_URL CHAOS_RECOMMENDATIONS_URL CHAOS_CHECKOUT_URL
      compose stop -t 2 slow-partner-2 slow-partner-3 checkout-2 >/dev/null 2>&1
      compose up -d --no-deps checkout edge >/dev/null 2>&1
      recovered
      ;;
  esac
done

echo
echo "== healthy + ${#scenarios[@]} chaos scenarios, $requests requests each, tolerance $tolerance_ms ms: $((SECONDS - run_start)) s"
finished=true
((failed == 0))
