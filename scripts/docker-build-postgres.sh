#!/usr/bin/env bash
# Stages the FROM-scratch PostgreSQL image of docker-compose.yml in
# docker/postgres/ out of the build host's PostgreSQL 15 (Debian's
# postgresql-15 package): no registry is needed. scripts/docker-build.sh
# calls it after staging docker/bin/ (the image carries bin/healthcheck).
#
#   docker/postgres/rootfs/  the server binary, the shared libraries `ldd`
#                            lists for it and its modules, the dynamic loader,
#                            /usr/share/postgresql/15, /usr/share/zoneinfo,
#                            /etc/passwd and /etc/group with `postgres` (999)
#   docker/postgres/pgdata/  var/lib/postgresql/data: `initdb` run on this
#                            host, trust auth for the compose network,
#                            listen_addresses = '*', no Unix socket
#
# Usage: scripts/docker-build-postgres.sh
# Environment: PG_BINDIR (/usr/lib/postgresql/15/bin). Run as root, initdb
# runs as the host's `postgres` user (initdb refuses root); run as anyone
# else, it runs as that user. The image owns the files as 999:999 either way.
set -euo pipefail
cd "$(dirname "$0")/.."

bindir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
ctx=docker/postgres
rootfs=$ctx/rootfs
pgdata=$ctx/pgdata

for f in "$bindir/postgres" "$bindir/initdb"; do
  [[ -x $f ]] || { echo "docker-build-postgres: $f is missing (install postgresql-15 or set PG_BINDIR)" >&2; exit 2; }
done
[[ -x docker/bin/healthcheck ]] || { echo "docker-build-postgres: docker/bin/healthcheck is missing: run scripts/docker-build.sh" >&2; exit 2; }
# Where the binary looks for its modules and shared files, as it was built.
pkglibdir=$("$bindir/pg_config" --pkglibdir)
sharedir=$("$bindir/pg_config" --sharedir)
tzdir=$("$bindir/pg_config" --configure | tr ' ' '\n' | sed -n "s/^'--with-system-tzdata=\(.*\)'$/\1/p")

rm -rf "$rootfs" "$pgdata"
mkdir -p "$rootfs" "$pgdata"

# put PATH: the file at PATH (symlinks followed) at the same path in rootfs/.
put() { install -D -m "$(stat -L -c %a "$1")" "$(readlink -f "$1")" "$rootfs$1"; }
# The shared libraries (and the loader) a binary or module needs.
needs() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }'; }

put "$bindir/postgres"
# The modules the server may load (plpgsql, text search dictionaries,
# encoding conversions, contrib). Not llvmjit: it needs libLLVM, and jit is off.
modules=()
while IFS= read -r m; do modules+=("$m"); done < <(find "$pkglibdir" -maxdepth 1 -name '*.so' ! -name 'llvmjit*' | sort)
for m in "${modules[@]}"; do put "$m"; done
libs=$(needs "$bindir/postgres" "${modules[@]}" | sort -u)
for l in $libs; do put "$l"; done
mkdir -p "$rootfs$(dirname "$sharedir")"
cp -a "$sharedir" "$rootfs$sharedir"
if [[ -n "$tzdir" ]]; then
  mkdir -p "$rootfs$(dirname "$tzdir")"
  cp -a "$tzdir" "$rootfs$tzdir"
fi
install -D -m 0755 docker/bin/healthcheck "$rootfs/healthcheck"
mkdir -p "$rootfs/etc"
printf 'postgres:x:999:999:PostgreSQL:/var/lib/postgresql:/nonexistent\n' >"$rootfs/etc/passwd"
printf 'postgres:x:999:\n' >"$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"

# The data directory, initialised here so that the image needs no shell.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
run=()
if ((EUID == 0)); then
  id postgres >/dev/null 2>&1 || { echo "docker-build-postgres: run as root, initdb needs a 'postgres' user" >&2; exit 2; }
  chown postgres: "$tmp"
  run=(runuser -u postgres --)
fi
"${run[@]}" "$bindir/initdb" -D "$tmp/data" -U postgres --auth=trust \
  --encoding=UTF8 --locale=C --no-sync >"$tmp/initdb.log" 2>&1 ||
  { cat "$tmp/initdb.log" >&2; exit 1; }
cat >>"$tmp/data/postgresql.conf" <<'EOF'

# docker/postgres (scripts/docker-build-postgres.sh): reached over the
# compose network only, no Unix socket (the image has no /var/run), small.
listen_addresses = '*'
unix_socket_directories = ''
shared_buffers = 16MB
jit = off
timezone = 'UTC'
log_timezone = 'UTC'
EOF
cat >>"$tmp/data/pg_hba.conf" <<'EOF'

# docker/postgres: trust on the compose network (published on 127.0.0.1 only).
host    all             all             0.0.0.0/0               trust
host    all             all             ::/0                    trust
EOF
mkdir -p "$pgdata/var/lib/postgresql"
cp -a "$tmp/data" "$pgdata/var/lib/postgresql/data"
chown -R "$(id -u):$(id -g)" "$pgdata"
chmod 0700 "$pgdata/var/lib/postgresql/data"

echo "docker-build-postgres: $(wc -w <<<"$libs") shared libraries, ${#modules[@]} modules; $(du -sh "$rootfs" | cut -f1) in $rootfs/, data directory in $pgdata/"
