#!/usr/bin/env bash
# Private MariaDB server for the export center's tests and local development.
#
# Usage: scripts/mariadb.sh {start|stop|status|url [DB_NAME]}
#
#   start   Install mariadb-server/mariadb-client with apt-get when missing, initialize
#           a private data directory, start mariadbd in the background on 127.0.0.1 and
#           create the databases `export_center` and `export_center_test` plus the user
#           export_center/export_center. Idempotent: when something already answers on
#           the port, it only ensures the databases and the user.
#   stop    Stop the server this script started (pid file) and wait until it is gone.
#   status  Print whether the server answers; exit 0 when it does, 3 otherwise.
#   url     Print the SQLAlchemy URL of the test database (or of DB_NAME).
#
# Environment:
#   EXPORT_CENTER_MARIADB_DIR   state directory (default /tmp/export-center-mariadb);
#                               keep it short, the socket path must fit in 107 bytes
#   EXPORT_CENTER_MARIADB_PORT  TCP port (default 3307, so it never clashes with a
#                               system MariaDB on 3306)
#
# The server runs with --no-defaults (no /etc/mysql/*.cnf) and its own socket and pid
# file, and with durability switched off for speed (innodb_flush_log_at_trx_commit=2,
# no binary log): it is a test server, never a place for data you want to keep.
set -euo pipefail

BASE_DIR="${EXPORT_CENTER_MARIADB_DIR:-/tmp/export-center-mariadb}"
PORT="${EXPORT_CENTER_MARIADB_PORT:-3307}"
DATA_DIR="$BASE_DIR/data"
SOCKET="$BASE_DIR/mariadb.sock"
PID_FILE="$BASE_DIR/mariadb.pid"
ERROR_LOG="$BASE_DIR/mariadb.err"
LOCK_FILE="$BASE_DIR/script.lock"
START_TIMEOUT=60
STOP_TIMEOUT=60

APP_USER="export_center"
APP_PASSWORD="export_center"
DATABASES=(export_center export_center_test)

log() { echo "[mariadb.sh] $*" >&2; }
die() { echo "[mariadb.sh] ERROR: $*" >&2; exit 1; }

# First of several candidate program names found on PATH or in the sbin directories
# (mariadbd lives in /usr/sbin, which is not on a normal user's PATH).
find_prog() {
    local name dir
    for name in "$@"; do
        if command -v "$name" >/dev/null 2>&1; then
            command -v "$name"
            return 0
        fi
        for dir in /usr/sbin /usr/local/sbin /sbin /usr/bin /usr/local/bin; do
            if [ -x "$dir/$name" ]; then
                echo "$dir/$name"
                return 0
            fi
        done
    done
    return 1
}

server_bin() { find_prog mariadbd mysqld; }
client_bin() { find_prog mariadb mysql; }
admin_bin() { find_prog mariadb-admin mysqladmin; }
install_db_bin() { find_prog mariadb-install-db mysql_install_db; }

install_packages() {
    if server_bin >/dev/null && client_bin >/dev/null && admin_bin >/dev/null \
        && install_db_bin >/dev/null; then
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || die "mariadbd is missing and apt-get is not available"
    local sudo=""
    if [ "$(id -u)" != "0" ]; then
        command -v sudo >/dev/null 2>&1 || die "mariadbd is missing; run as root to install it"
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    local pkgs=(mariadb-server mariadb-client)
    log "installing ${pkgs[*]} with apt-get"
    # Run `apt-get update` only when the package lists cannot satisfy the install
    # (a fresh image has no lists at all).
    if ! $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}"; then
        log "apt-get install failed; running apt-get update and retrying"
        $sudo apt-get update -q
        $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}"
    fi
    server_bin >/dev/null || die "mariadb-server installed but mariadbd was not found"
    admin_bin >/dev/null || die "mariadb-client installed but mariadb-admin was not found"
}

# True when something answers the MariaDB protocol on 127.0.0.1:$PORT. `ping` succeeds
# even when the credentials are refused, which is all we want to know here.
tcp_alive() {
    local admin
    admin="$(admin_bin)" || return 1
    "$admin" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$PORT" -u ping_probe \
        --connect-timeout=2 ping >/dev/null 2>&1
}

socket_alive() {
    local admin
    [ -S "$SOCKET" ] || return 1
    admin="$(admin_bin)" || return 1
    "$admin" --no-defaults --protocol=socket --socket="$SOCKET" -u root \
        --connect-timeout=2 ping >/dev/null 2>&1
}

pid_alive() {
    local pid
    [ -f "$PID_FILE" ] || return 1
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# Print the last lines of the error log and fail.
fail_with_log() {
    echo "[mariadb.sh] ERROR: $*" >&2
    if [ -f "$ERROR_LOG" ]; then
        echo "[mariadb.sh] --- last 40 lines of $ERROR_LOG ---" >&2
        tail -n 40 "$ERROR_LOG" >&2
        echo "[mariadb.sh] --- end of $ERROR_LOG ---" >&2
    fi
    exit 1
}

init_datadir() {
    if [ -d "$DATA_DIR/mysql" ] && [ -f "$BASE_DIR/.initialized" ]; then
        return 0
    fi
    local install_db
    install_db="$(install_db_bin)" || die "mariadb-install-db not found"
    log "initializing data directory $DATA_DIR"
    rm -rf "$DATA_DIR" "$BASE_DIR/.initialized"
    mkdir -p "$DATA_DIR"
    # root@localhost gets an empty password and unix_socket; it is reachable only
    # through our private socket (the server listens on 127.0.0.1 only).
    if ! "$install_db" --no-defaults --datadir="$DATA_DIR" --user="$(id -un)" \
        --auth-root-authentication-method=normal --skip-test-db \
        >"$BASE_DIR/install-db.log" 2>&1; then
        tail -n 40 "$BASE_DIR/install-db.log" >&2
        die "mariadb-install-db failed (full log: $BASE_DIR/install-db.log)"
    fi
    touch "$BASE_DIR/.initialized"
}

start_server() {
    local server started_pid=""
    server="$(server_bin)" || die "mariadbd not found"
    if pid_alive; then
        log "server process $(cat "$PID_FILE") exists; waiting for it to answer"
    else
        rm -f "$PID_FILE" "$SOCKET" "$SOCKET.lock"
        log "starting $server on 127.0.0.1:$PORT (datadir $DATA_DIR)"
        : >>"$ERROR_LOG"
        # setsid: the server must outlive this shell and not receive its signals
        # (a Ctrl-C in pytest must not take the database down); 9>&- keeps the
        # start lock from being inherited by the server. --wait keeps $! alive exactly
        # as long as the server, whether or not setsid had to fork.
        setsid --wait "$server" --no-defaults \
            --user="$(id -un)" \
            --datadir="$DATA_DIR" \
            --bind-address=127.0.0.1 \
            --port="$PORT" \
            --socket="$SOCKET" \
            --pid-file="$PID_FILE" \
            --log-error="$ERROR_LOG" \
            --tmpdir="$BASE_DIR/tmp" \
            --skip-name-resolve \
            --skip-log-bin \
            --sync-binlog=0 \
            --innodb-flush-log-at-trx-commit=2 \
            --innodb-buffer-pool-size=512M \
            --max-connections=1000 \
            --local-infile=1 \
            --character-set-server=utf8mb4 \
            --collation-server=utf8mb4_unicode_ci \
            </dev/null >>"$ERROR_LOG" 2>&1 9>&- &
        started_pid=$!
        disown || true
    fi
    local waited=0
    while ! socket_alive; do
        if [ "$waited" -ge "$START_TIMEOUT" ]; then
            fail_with_log "mariadbd did not answer 'mariadb-admin ping' within ${START_TIMEOUT}s"
        fi
        # The pid file appears only late in startup; the launched process tells
        # earlier whether the server died (bad option, port taken, ...).
        if [ -n "$started_pid" ] && ! kill -0 "$started_pid" 2>/dev/null; then
            fail_with_log "mariadbd exited during startup"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "mariadbd is up (pid $(cat "$PID_FILE" 2>/dev/null || echo '?'), ${waited}s)"
}

ensure_schema() {
    local client sql db
    client="$(client_bin)" || die "mariadb client not found"
    sql=""
    for db in "${DATABASES[@]}"; do
        sql+="CREATE DATABASE IF NOT EXISTS \`$db\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;"
    done
    local host
    for host in 127.0.0.1 localhost %; do
        sql+="CREATE USER IF NOT EXISTS '$APP_USER'@'$host' IDENTIFIED BY '$APP_PASSWORD';"
        sql+="GRANT ALL PRIVILEGES ON \`export\\_center%\`.* TO '$APP_USER'@'$host';"
    done
    sql+="FLUSH PRIVILEGES;"

    # Our own server: root through the private socket. A server someone else started on
    # the port: try root over TCP without a password.
    if [ -S "$SOCKET" ] && "$client" --no-defaults --protocol=socket --socket="$SOCKET" \
        -u root -e "$sql" 2>/dev/null; then
        :
    elif "$client" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$PORT" -u root \
        -e "$sql" 2>/dev/null; then
        :
    else
        # No admin access: acceptable only if the application user already works.
        for db in "${DATABASES[@]}"; do
            "$client" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$PORT" \
                -u "$APP_USER" -p"$APP_PASSWORD" -e "USE \`$db\`" 2>/dev/null \
                || die "the server on 127.0.0.1:$PORT is not ours, root access failed and" \
                       "user $APP_USER cannot use database $db"
        done
        log "no admin access to the server on port $PORT; databases and user already usable"
        return 0
    fi
    log "databases ${DATABASES[*]} and user $APP_USER ready"
}

cmd_start() {
    install_packages
    mkdir -p "$BASE_DIR" "$BASE_DIR/tmp"
    # Serialize concurrent `start` calls (parallel CI jobs, two terminals).
    exec 9>"$LOCK_FILE"
    flock -w 120 9 || die "could not lock $LOCK_FILE"
    if socket_alive || tcp_alive; then
        log "a server already answers on 127.0.0.1:$PORT"
    else
        init_datadir
        start_server
    fi
    ensure_schema
}

cmd_stop() {
    if ! pid_alive; then
        rm -f "$PID_FILE"
        if tcp_alive; then
            log "no server of ours is running (but something answers on port $PORT)"
        else
            log "not running"
        fi
        return 0
    fi
    local pid waited=0
    pid="$(cat "$PID_FILE")"
    log "stopping mariadbd (pid $pid)"
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge "$STOP_TIMEOUT" ]; then
            fail_with_log "mariadbd (pid $pid) did not stop within ${STOP_TIMEOUT}s"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    rm -f "$PID_FILE"
    log "stopped"
}

cmd_status() {
    if socket_alive; then
        echo "running (ours: pid $(cat "$PID_FILE" 2>/dev/null || echo '?'), 127.0.0.1:$PORT, socket $SOCKET)"
    elif tcp_alive; then
        echo "running (not started by this script) on 127.0.0.1:$PORT"
    else
        echo "not running"
        return 3
    fi
}

cmd_url() {
    local db="${1:-export_center_test}"
    echo "mysql+pymysql://$APP_USER:$APP_PASSWORD@127.0.0.1:$PORT/$db?charset=utf8mb4"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    url) shift; cmd_url "$@" ;;
    *)
        echo "usage: $0 {start|stop|status|url [DB_NAME]}" >&2
        exit 2
        ;;
esac
