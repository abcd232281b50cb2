#!/usr/bin/env python3
"""The `burst-part` shape from outside, with the real binaries as separate
processes: a slow partner (8 workers, 50 ms on every path), checkout and
edge with their defaults, then 300 requests sent at once from 300
connections opened beforehand, each with `request-budget-ms: 1000`
(Python's http.client, one thread per connection). Budget mode and
`--budget-mode off` side by side, alternating, ROUNDS rounds each; every
round starts a cold chain. With `--connect-in-burst` each connection is
opened at the burst instant instead (as the load-tests generator does).
With `--warm` the chain is warmed first, as services in production are:
20 requests a second for 3 s (one connection, the burst's budget), then
the burst.

Usage: scripts/burst-outside.py [--connect-in-burst] [--warm] [ROUNDS] [REQUESTS] [BUDGET_MS]
Needs the release binaries (cargo build --release -p edge -p checkout
-p slow-partner); honours CARGO_TARGET_DIR. Loopback only; every process
is stopped at the end of its round, and every request has a 10 s client
timeout.
"""

import http.client
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release")


def free_ports(n):
    """n distinct free loopback ports (all held until all are picked)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_listening(port, deadline):
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


def start_chain(mode):
    for name in ("slow-partner", "checkout", "edge"):
        if not os.access(f"{BIN}/{name}", os.X_OK):
            raise SystemExit(f"{BIN}/{name} not found: cargo build --release -p edge -p checkout -p slow-partner")
    partner, checkout, edge = free_ports(3)
    url = lambda path: f"http://127.0.0.1:{partner}/{path}?delay=50ms"
    procs = [
        subprocess.Popen([f"{BIN}/slow-partner", "--listen", f"127.0.0.1:{partner}", "--workers", "8"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([f"{BIN}/checkout", "--listen", f"127.0.0.1:{checkout}", "--budget-mode", mode,
                          "--inventory-url", url("inventory"), "--pricing-url", url("pricing"),
                          "--recommendations-url", url("recommendations")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([f"{BIN}/edge", "--listen", f"127.0.0.1:{edge}", "--budget-mode", mode,
                          "--checkout-url", f"http://127.0.0.1:{checkout}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    deadline = time.monotonic() + 10
    try:
        for port in (partner, checkout, edge):
            wait_listening(port, deadline)
    except SystemExit:
        stop(procs)
        raise
    return edge, procs


def stop(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()


def warm_up(edge, budget_ms, rate=20, seconds=3):
    """`rate` requests a second for `seconds`, one after another on one
    connection, each with `budget_ms`; how many were answered 2xx."""
    conn = http.client.HTTPConnection("127.0.0.1", edge, timeout=10)
    start, ok = time.monotonic(), 0
    for i in range(rate * seconds):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            conn.request("GET", "/checkout", headers={"request-budget-ms": str(budget_ms)})
            res = conn.getresponse()
            res.read()
            ok += 200 <= res.status < 300
        except OSError:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", edge, timeout=10)
    conn.close()
    return ok


def burst(edge, n, budget_ms, connect_in_burst):
    results = []
    lock = threading.Lock()
    ready = threading.Barrier(n)

    def one():
        conn = http.client.HTTPConnection("127.0.0.1", edge, timeout=10)
        if not connect_in_burst:
            try:
                conn.connect()
            except OSError:
                # Its request connects again below and, failing, counts as
                # a failure; every thread reaches the barrier.
                pass
        ready.wait()
        sent = time.monotonic()
        try:
            conn.request("GET", "/checkout", headers={"request-budget-ms": str(budget_ms)})
            res = conn.getresponse()
            res.read()
            status = res.status
        except OSError:
            status = None
        took = (time.monotonic() - sent) * 1000
        with lock:
            results.append((status, took))
        conn.close()

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def main():
    args = sys.argv[1:]
    connect_in_burst = "--connect-in-burst" in args
    warm = "--warm" in args
    args = [a for a in args if a not in ("--connect-in-burst", "--warm")]
    rounds = int(args[0]) if len(args) > 0 else 3
    n = int(args[1]) if len(args) > 1 else 300
    budget_ms = int(args[2]) if len(args) > 2 else 1000
    opened = "at the burst instant" if connect_in_burst else "beforehand"
    print(f"{n} requests at once (connections opened {opened}), "
          f"request-budget-ms {budget_ms}, partner 8 workers at 50 ms, "
          f"{'warm (20 req/s for 3 s first)' if warm else 'cold'}")
    print("| round | mode | 2xx within budget | 2xx | failures | failures' p50 ms | slowest 2xx ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in range(1, rounds + 1):
        for mode in ("on", "off"):
            edge, procs = start_chain(mode)
            try:
                time.sleep(0.3)
                if warm:
                    warm_up(edge, budget_ms)
                    time.sleep(0.2)
                results = burst(edge, n, budget_ms, connect_in_burst)
            finally:
                stop(procs)
            ok = [t for s, t in results if s is not None and 200 <= s < 300]
            good = sum(1 for t in ok if t <= budget_ms)
            failed = [t for s, t in results if s is None or not 200 <= s < 300]
            p50 = f"{statistics.median(failed):.0f}" if failed else "-"
            slowest = f"{max(ok):.0f}" if ok else "-"
            print(f"| {r} | {mode} | {good} | {len(ok)} | {len(failed)} | {p50} | {slowest} |")


if __name__ == "__main__":
    main()
