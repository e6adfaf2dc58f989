# Sourced by .ci/run: a throwaway PostgreSQL on 127.0.0.1 for the distributed-search test
# (tests/search/test_distributed.py), exported as KTX_TEST_POSTGRES_URL.
# Idempotent (a server already running on the port is reused) and never fails CI: without
# PostgreSQL and without root apt-get it prints a warning, leaves the variable unset, and the
# test skips saying why.

ktx_pg_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ] && { echo "$dir"; return 0; }
  done
  command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1 && { dirname "$(command -v pg_ctl)"; return 0; }
  return 1
}

ktx_pg_setup() {
  local port="${KTX_PG_PORT:-54329}" data="${KTX_PG_DATA:-/tmp/ktx-ci-postgres}" bin run_as=()
  bin="$(ktx_pg_bin)" || {
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; } >/dev/null 2>&1 \
        || { echo "warning: could not install postgresql; the PostgreSQL search test will be skipped" >&2; return 0; }
      bin="$(ktx_pg_bin)" || { echo "warning: postgresql installed but pg_ctl not found; test skipped" >&2; return 0; }
    else
      echo "warning: no PostgreSQL and no root apt-get; the PostgreSQL search test will be skipped" >&2
      return 0
    fi
  }
  # initdb and the server refuse to run as root: run them as the postgres user when we are root.
  if [ "$(id -u)" = "0" ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres >/dev/null 2>&1 || true
    run_as=(env -C / runuser -u postgres --)  # from /, which the postgres user can always read
  fi
  mkdir -p "$data" && { [ "$(id -u)" != "0" ] || chown postgres "$data"; }
  if ! "${run_as[@]}" "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    if [ ! -f "$data/PG_VERSION" ]; then
      "${run_as[@]}" "$bin/initdb" -D "$data" -U postgres -A trust >/dev/null 2>&1 \
        || { echo "warning: initdb failed; the PostgreSQL search test will be skipped" >&2; return 0; }
    fi
    "${run_as[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
      -o "-p $port -c listen_addresses=127.0.0.1 -k $data" start >/dev/null 2>&1 \
      || { echo "warning: PostgreSQL did not start (see $data/server.log); test skipped" >&2; return 0; }
  fi
  local psql=("$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -qtA)
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname = 'ktx'" 2>/dev/null)" != "1" ]; then
    "${psql[@]}" -c "CREATE ROLE ktx LOGIN PASSWORD 'ktx'" >/dev/null 2>&1 || true
  fi
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'ktx_test'" 2>/dev/null)" != "1" ]; then
    "${psql[@]}" -c "CREATE DATABASE ktx_test OWNER ktx" >/dev/null 2>&1 || true
  fi
  if [ "$("${psql[@]}" -d ktx_test -c "SELECT 1" 2>/dev/null)" = "1" ]; then
    export KTX_TEST_POSTGRES_URL="postgresql://ktx:ktx@127.0.0.1:$port/ktx_test"
    echo "PostgreSQL for the search tests: 127.0.0.1:$port (data in $data)" >&2
  else
    echo "warning: PostgreSQL is not answering on 127.0.0.1:$port; the PostgreSQL search test will be skipped" >&2
  fi
  return 0
}

ktx_pg_setup || echo "warning: PostgreSQL setup failed; the PostgreSQL search test will be skipped" >&2
true
