# shellcheck shell=bash
# Throwaway PostgreSQL server for tests and local development.
#
# Usage (source this file, do not execute it):
#   . scripts/lib/postgres.sh
#   herald_pg_start        # exports HERALD_PG_URL, HERALD_PG_DIR, HERALD_PG_PORT, HERALD_PG_BINDIR
#   ...
#   herald_pg_stop         # stops the server and removes its directory (safe to call twice)
#
# Follows /work/shared/reference/local-services.md: trust auth, 127.0.0.1 only, no fsync.
# PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user.
# The functions return non-zero on failure (they do not rely on `set -e`).

# Newest /usr/lib/postgresql/<version>/bin, or the directory of pg_ctl on PATH.
herald_pg_bindir() {
    local dir
    dir=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -type d -name bin 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$dir" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ]; then
        printf '%s\n' "$dir"
        return 0
    fi
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
        return 0
    fi
    echo "postgres.sh: no PostgreSQL server binaries found (install the Debian package 'postgresql', e.g. scripts/setup)" >&2
    return 1
}

# A TCP port on 127.0.0.1 that is free right now.
herald_pg_free_port() {
    local py
    py=$(command -v python3 || echo /usr/bin/python3)
    "$py" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# Run a server command as the postgres user when we are root, else as ourselves.
# Runs from inside the server directory so the postgres user never sits in an unreadable cwd.
_herald_pg_run() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd "$HERALD_PG_DIR" && runuser -u postgres -- "$@")
    else
        (cd "$HERALD_PG_DIR" && "$@")
    fi
}

herald_pg_start() {
    if [ -n "${HERALD_PG_DIR:-}" ] && [ -d "${HERALD_PG_DIR}/data" ]; then
        echo "postgres.sh: a server is already running from $HERALD_PG_DIR (call herald_pg_stop first)" >&2
        return 1
    fi
    local bindir port attempt
    bindir=$(herald_pg_bindir) || return 1

    if [ "$(id -u)" -eq 0 ] && ! id -u postgres >/dev/null 2>&1; then
        echo "postgres.sh: running as root but there is no 'postgres' user to run the server as" >&2
        return 1
    fi

    # /tmp explicitly: the postgres user must be able to reach the directory (TMPDIR may be private).
    HERALD_PG_DIR=$(mktemp -d /tmp/herald-pg.XXXXXX) || { echo "postgres.sh: mktemp failed" >&2; return 1; }
    export HERALD_PG_DIR HERALD_PG_BINDIR="$bindir"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres: "$HERALD_PG_DIR" || { herald_pg_stop; return 1; }
    fi
    chmod 700 "$HERALD_PG_DIR"

    if ! _herald_pg_run "$bindir/initdb" -D "$HERALD_PG_DIR/data" -U postgres --auth=trust \
            -E UTF8 --no-locale --no-sync >"$HERALD_PG_DIR/initdb.log" 2>&1; then
        echo "postgres.sh: initdb failed:" >&2
        tail -n 30 "$HERALD_PG_DIR/initdb.log" >&2
        herald_pg_stop
        return 1
    fi

    # The port is free when picked but could be taken before the server binds it: retry a few times.
    for attempt in 1 2 3; do
        port=$(herald_pg_free_port) || { echo "postgres.sh: could not pick a free port" >&2; herald_pg_stop; return 1; }
        if _herald_pg_run "$bindir/pg_ctl" -D "$HERALD_PG_DIR/data" -l "$HERALD_PG_DIR/server.log" -w -t 30 start \
                -o "-c listen_addresses=127.0.0.1 -p $port -k $HERALD_PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
                >"$HERALD_PG_DIR/pg_ctl.log" 2>&1; then
            break
        fi
        if [ "$attempt" -eq 3 ]; then
            echo "postgres.sh: PostgreSQL did not start (pg_ctl output, then server log tail):" >&2
            cat "$HERALD_PG_DIR/pg_ctl.log" >&2
            tail -n 40 "$HERALD_PG_DIR/server.log" >&2 2>/dev/null
            herald_pg_stop
            return 1
        fi
        # Stop a half-started server before trying another port.
        _herald_pg_run "$bindir/pg_ctl" -D "$HERALD_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    done
    export HERALD_PG_PORT="$port"

    if ! "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -X -q -v ON_ERROR_STOP=1 \
            -c 'create database herald' >"$HERALD_PG_DIR/createdb.log" 2>&1; then
        echo "postgres.sh: could not create database 'herald':" >&2
        cat "$HERALD_PG_DIR/createdb.log" >&2
        tail -n 20 "$HERALD_PG_DIR/server.log" >&2 2>/dev/null
        herald_pg_stop
        return 1
    fi
    export HERALD_PG_URL="postgresql://postgres@127.0.0.1:$port/herald"
    return 0
}

herald_pg_stop() {
    local dir="${HERALD_PG_DIR:-}"
    [ -n "$dir" ] || return 0
    if [ -f "$dir/data/postmaster.pid" ]; then
        _herald_pg_run "${HERALD_PG_BINDIR:-$(herald_pg_bindir)}/pg_ctl" -D "$dir/data" -m immediate stop \
            >/dev/null 2>&1 || echo "postgres.sh: pg_ctl stop failed for $dir" >&2
    fi
    case "$dir" in
        /tmp/herald-pg.*) rm -rf "$dir" ;;
        *) echo "postgres.sh: not removing unexpected directory '$dir'" >&2 ;;
    esac
    unset HERALD_PG_DIR HERALD_PG_PORT HERALD_PG_URL
    return 0
}
