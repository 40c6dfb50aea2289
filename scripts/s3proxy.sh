#!/usr/bin/env bash
# Private S3-compatible server for the export center's tests and local development:
# S3Proxy (org.gaul:s3proxy, jar-with-dependencies from Maven Central) with the
# filesystem backend, AWS signature V2 or V4, on 127.0.0.1.
#
# Usage: scripts/s3proxy.sh {start|stop|status|url|access-key|secret-key|env|bucket NAME}
#
#   start       Download the jar when missing (checked against Maven Central's SHA-1),
#               write the configuration and start S3Proxy in the background; wait until
#               it answers. Idempotent: when our server already answers, nothing else.
#   stop        Stop the server this script started (pid file) and wait until it is gone.
#   status      Print whether the server answers; exit 0 when it does, 3 otherwise.
#   url         Print the endpoint URL, e.g. http://127.0.0.1:18090.
#   access-key  Print the access key id; secret-key prints the secret access key.
#   env         Print the export center's settings for this server (shell syntax):
#               EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL, ...ACCESS_KEY_ID, ...
#   bucket NAME Create bucket NAME (no error when it exists).
#
# Environment:
#   EXPORT_CENTER_S3PROXY_DIR      state directory: configuration, pid file, log and the
#                                  buckets under data/ (default /tmp/export-center-s3proxy)
#   EXPORT_CENTER_S3PROXY_PORT     TCP port on 127.0.0.1 (default 18090)
#   EXPORT_CENTER_S3PROXY_CACHE    where the jar is kept (default
#                                  $HOME/.cache/export-center/s3proxy)
#   EXPORT_CENTER_S3PROXY_VERSION  S3Proxy version (default 4.1.0)
#   EXPORT_CENTER_S3PROXY_READ_ONLY=1  refuse every write (S3Proxy's read-only
#                                  middleware): how tests show a bucket that is not
#                                  writable (the tests run as root, so file modes cannot)
#
# Credentials are fixed test values (like the MariaDB test user): access key
# export-center, secret export-center-secret. It is a test server: the files live in
# plain directories, never a place for data you want to keep.
set -euo pipefail

BASE_DIR="${EXPORT_CENTER_S3PROXY_DIR:-/tmp/export-center-s3proxy}"
PORT="${EXPORT_CENTER_S3PROXY_PORT:-18090}"
CACHE_DIR="${EXPORT_CENTER_S3PROXY_CACHE:-$HOME/.cache/export-center/s3proxy}"
VERSION="${EXPORT_CENTER_S3PROXY_VERSION:-4.1.0}"
JAR="$CACHE_DIR/s3proxy-$VERSION-jar-with-dependencies.jar"
MAVEN_URL="https://repo1.maven.org/maven2/org/gaul/s3proxy/$VERSION/s3proxy-$VERSION-jar-with-dependencies.jar"
DATA_DIR="$BASE_DIR/data"
CONF="$BASE_DIR/s3proxy.conf"
PID_FILE="$BASE_DIR/s3proxy.pid"
LOG_FILE="$BASE_DIR/s3proxy.log"
LOCK_FILE="$BASE_DIR/script.lock"
START_TIMEOUT=90
STOP_TIMEOUT=30

ACCESS_KEY="export-center"
SECRET_KEY="export-center-secret"
REGION="us-east-1"
URL="http://127.0.0.1:$PORT"
EMPTY_SHA256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

log() { echo "[s3proxy.sh] $*" >&2; }
die() { echo "[s3proxy.sh] ERROR: $*" >&2; exit 1; }

fail_with_log() {
    echo "[s3proxy.sh] ERROR: $*" >&2
    if [ -f "$LOG_FILE" ]; then
        echo "[s3proxy.sh] --- last 40 lines of $LOG_FILE ---" >&2
        tail -n 40 "$LOG_FILE" >&2
    fi
    exit 1
}

install_java() {
    command -v java >/dev/null 2>&1 && return 0
    command -v apt-get >/dev/null 2>&1 || die "java is missing and apt-get is not available"
    local sudo=""
    if [ "$(id -u)" != "0" ]; then
        command -v sudo >/dev/null 2>&1 || die "java is missing; run as root to install it"
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    log "installing openjdk-17-jre-headless with apt-get"
    if ! $sudo apt-get install -y -q --no-install-recommends openjdk-17-jre-headless; then
        $sudo apt-get update -q
        $sudo apt-get install -y -q --no-install-recommends openjdk-17-jre-headless
    fi
}

# The jar from Maven Central, checked against the SHA-1 Maven Central publishes.
ensure_jar() {
    [ -s "$JAR" ] && return 0
    mkdir -p "$CACHE_DIR"
    log "downloading S3Proxy $VERSION from Maven Central into $CACHE_DIR"
    local t0=$SECONDS want got
    curl -sSfL --retry 3 -o "$JAR.tmp" "$MAVEN_URL" || die "download of $MAVEN_URL failed"
    want="$(curl -sSfL --retry 3 "$MAVEN_URL.sha1" | cut -c1-40)"
    got="$(sha1sum "$JAR.tmp" | cut -d' ' -f1)"
    if [ "$want" != "$got" ]; then
        rm -f "$JAR.tmp"
        die "SHA-1 of the downloaded jar is $got, Maven Central says $want"
    fi
    mv -f "$JAR.tmp" "$JAR"
    log "S3Proxy $VERSION downloaded and verified in $((SECONDS - t0))s"
}

write_config() {
    mkdir -p "$DATA_DIR"
    cat >"$CONF" <<EOF
# Written by scripts/s3proxy.sh; rewritten on every start.
s3proxy.endpoint=$URL
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$ACCESS_KEY
s3proxy.credential=$SECRET_KEY
jclouds.provider=filesystem
jclouds.filesystem.basedir=$DATA_DIR
EOF
    if [ "${EXPORT_CENTER_S3PROXY_READ_ONLY:-}" = 1 ]; then
        echo "s3proxy.read-only-blobstore=true" >>"$CONF"
    fi
}

# Something answers HTTP on the port (any status: an anonymous GET is refused with 403).
http_alive() {
    curl -s -o /dev/null --max-time 2 "$URL/" 2>/dev/null
}

pid_alive() {
    local pid
    [ -f "$PID_FILE" ] || return 1
    pid="$(cat "$PID_FILE" 2>/dev/null || true)"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "s3proxy"
}

cmd_start() {
    install_java
    mkdir -p "$BASE_DIR"
    exec 9>"$LOCK_FILE"
    flock -w 300 9 || die "could not lock $LOCK_FILE"
    ensure_jar
    if pid_alive && http_alive; then
        log "S3Proxy already answers on $URL (pid $(cat "$PID_FILE"))"
        return 0
    fi
    http_alive && die "port $PORT is taken by a process this script did not start"
    write_config
    rm -f "$PID_FILE"
    [ -f "$LOG_FILE" ] && mv -f "$LOG_FILE" "$LOG_FILE.prev"
    log "starting S3Proxy $VERSION on $URL (data $DATA_DIR)"
    # setsid: the server outlives this shell and never gets its signals (Ctrl-C in pytest
    # must not take it down); 9>&- keeps the start lock from being inherited.
    # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
        java -Xms64m -Xmx384m -XX:+UseSerialGC -jar "$JAR" --properties "$CONF" \
        </dev/null >"$LOG_FILE" 2>&1 9>&- &
    disown || true
    local waited=0
    while ! http_alive; do
        if [ "$waited" -ge $((START_TIMEOUT * 5)) ]; then
            fail_with_log "S3Proxy did not answer on $URL within ${START_TIMEOUT}s"
        fi
        if [ -s "$PID_FILE" ] && ! pid_alive; then
            fail_with_log "S3Proxy exited during startup"
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
    log "S3Proxy is up on $URL (pid $(cat "$PID_FILE"), $((waited / 5))s)"
}

cmd_stop() {
    mkdir -p "$BASE_DIR"
    exec 9>"$LOCK_FILE"
    flock -w 300 9 || die "could not lock $LOCK_FILE"
    if ! pid_alive; then
        rm -f "$PID_FILE"
        log "not running"
        return 0
    fi
    local pid waited=0
    pid="$(cat "$PID_FILE")"
    log "stopping S3Proxy (pid $pid)"
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge $((STOP_TIMEOUT * 5)) ]; then
            log "still running after ${STOP_TIMEOUT}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
    rm -f "$PID_FILE"
    log "stopped"
}

cmd_status() {
    if http_alive; then
        echo "S3Proxy answers on $URL (data $DATA_DIR)"
        return 0
    fi
    echo "S3Proxy does not answer on $URL"
    return 3
}

cmd_bucket() {
    local name="${1:-}" code
    [ -n "$name" ] || die "usage: $0 bucket NAME"
    # curl signs the request (SigV4); S3 also wants the payload's SHA-256 (empty body).
    code="$(curl -s -o "$BASE_DIR/bucket.out" -w '%{http_code}' -X PUT \
        -H "x-amz-content-sha256: $EMPTY_SHA256" --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" "$URL/$name")"
    case "$code" in
        200) log "bucket $name created" ;;
        409) log "bucket $name exists" ;;
        *) cat "$BASE_DIR/bucket.out" >&2; die "creating bucket $name answered HTTP $code" ;;
    esac
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    url) echo "$URL" ;;
    access-key) echo "$ACCESS_KEY" ;;
    secret-key) echo "$SECRET_KEY" ;;
    env)
        echo "EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL=$URL"
        echo "EXPORT_CENTER_STORAGE__S3__REGION=$REGION"
        echo "EXPORT_CENTER_STORAGE__S3__PATH_STYLE=true"
        echo "AWS_ACCESS_KEY_ID=$ACCESS_KEY"
        echo "AWS_SECRET_ACCESS_KEY=$SECRET_KEY"
        ;;
    bucket) shift; cmd_bucket "$@" ;;
    *)
        echo "usage: $0 {start|stop|status|url|access-key|secret-key|env|bucket NAME}" >&2
        exit 2
        ;;
esac
