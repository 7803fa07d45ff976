# Sourced by scripts/test.sh: makes sure the tests have a PostgreSQL server they can use.
#
# The tests make a throwaway database per test through CRUCIBLE_TEST_PG_ADMIN (tests/conftest.py), which
# defaults to the server at 127.0.0.1:5432 as user postgres without a password. When that server does not
# answer, or does not let postgres in without a password, this starts a throwaway cluster in a temp dir
# on a free port (initdb/pg_ctl from Debian's postgresql package, installed when missing and we are root),
# points CRUCIBLE_TEST_PG_ADMIN at it, and removes it on exit. A CRUCIBLE_TEST_PG_ADMIN already set is
# used as it is.

pg_can_login() {  # $1: a libpq conninfo string
  python - "$1" <<'PY' >/dev/null 2>&1
import sys
import psycopg
psycopg.connect(sys.argv[1], connect_timeout=3).close()
PY
}

pg_bindir() {
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v pg_ctl)"
    return
  fi
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

pg_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "   installing Debian's postgresql package"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
}

pg_free_port() {
  python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pg_throwaway_start() {
  local bindir port as
  bindir="$(pg_bindir)" || true
  if [ -z "$bindir" ]; then pg_install; bindir="$(pg_bindir)" || true; fi
  if [ -z "$bindir" ]; then
    echo "   no initdb/pg_ctl found and cannot install them: install Debian's postgresql package" >&2
    return 1
  fi
  PG_THROWAWAY_DIR="$(mktemp -d "${TMPDIR:-/tmp}/crucible-pg.XXXXXX")"
  port="$(pg_free_port)"
  as=()
  if [ "$(id -u)" = 0 ]; then  # initdb refuses to run as root
    chown "$(id -u postgres 2>/dev/null || id -u nobody)" "$PG_THROWAWAY_DIR"
    as=(runuser -u "$(id -un postgres 2>/dev/null || echo nobody)" --)
  fi
  "${as[@]}" "$bindir/initdb" -D "$PG_THROWAWAY_DIR/data" -U postgres --auth=trust -E UTF8 --no-sync \
    >"$PG_THROWAWAY_DIR/initdb.log" 2>&1 || { cat "$PG_THROWAWAY_DIR/initdb.log" >&2; return 1; }
  PG_THROWAWAY_CTL=("${as[@]}" "$bindir/pg_ctl" -D "$PG_THROWAWAY_DIR/data")
  "${PG_THROWAWAY_CTL[@]}" -l "$PG_THROWAWAY_DIR/server.log" -w -t 60 start \
    -o "-p $port -k $PG_THROWAWAY_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
    >/dev/null || { cat "$PG_THROWAWAY_DIR/server.log" >&2; return 1; }
  export CRUCIBLE_TEST_PG_ADMIN="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
  echo "   started a throwaway cluster in $PG_THROWAWAY_DIR on port $port"
}

pg_throwaway_stop() {
  if [ -n "${PG_THROWAWAY_DIR:-}" ]; then
    "${PG_THROWAWAY_CTL[@]}" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$PG_THROWAWAY_DIR"
    PG_THROWAWAY_DIR=""
  fi
}

ensure_postgres() {
  if [ -n "${CRUCIBLE_TEST_PG_ADMIN:-}" ]; then
    echo "   using CRUCIBLE_TEST_PG_ADMIN as given"
  elif pg_can_login "host=127.0.0.1 port=5432 user=postgres dbname=postgres"; then
    echo "   using the server at 127.0.0.1:5432"
  else
    echo "   nothing at 127.0.0.1:5432 lets postgres in without a password"
    pg_throwaway_start
  fi
}
