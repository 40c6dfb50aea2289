#!/usr/bin/env bash
# The export center as a cluster on one machine: MariaDB, the RocketMQ broker, S3Proxy
# (S3-compatible storage), 2 APIs (`export-center serve --workers 2`: two API processes
# on each of two ports) and 3 workers (`export-center worker --metrics-port`), every
# process its own Prometheus scrape target. Sharded exports run distributed: any worker
# runs any shard of any export (task.distributed_shards). The same process lines are in deploy/cluster/Procfile for honcho or
# foreman; this script also prepares the servers, the secrets and the schema.
#
# Usage: deploy/cluster/run.sh {up|down|status|env|dotenv|token USER TENANT}
#
#   up      Start the servers (scripts/mariadb.sh, rocketmq.sh, s3proxy.sh: each is
#           idempotent and left running), create the bucket, run the migrations, then
#           start api-1, api-2 and worker-1..3 in the background (pid files and logs
#           under $CLUSTER_DIR) and wait until each answers. Idempotent.
#   down    Stop the five export-center processes (SIGTERM: running exports are handed
#           back or recovered by lease). The servers stay up; stop them with their
#           own scripts.
#   status  One line per process: pid, address, running or not.
#   env     The environment the processes run with (secrets masked).
#   dotenv  Write that environment unmasked to $CLUSTER_DIR/cluster.env (mode 600) and
#           print the file's path: the env file of the Procfile (honcho -e, foreman -e).
#   token   Print a bearer token for USER of TENANT (ORDERS and CUSTOMERS permissions).
#
# Environment (defaults in brackets):
#   CLUSTER_DIR             state: secrets, logs, pid files [/tmp/export-center-cluster]
#   CLUSTER_API_PORTS       the two API ports ["8001 8002"]
#   CLUSTER_WORKERS         worker processes [3]
#   CLUSTER_METRICS_PORTS   the workers' metrics ports, one per worker ["9101 9102 9103"]
#   CLUSTER_API_WORKERS     API processes per API (serve --workers) [2]
#   CLUSTER_API_METRICS_PORTS  per API the first metrics port: its supervisor (the
#                           publisher) there, API process k on that port + k ["9201 9211"]
#   CLUSTER_DISTRIBUTED_SHARDS  shards of one export on every worker [true]
#   CLUSTER_START_SERVERS   1: start MariaDB, the broker and S3Proxy with scripts/ [1]
#   CLUSTER_CONCURRENCY     exports run at once per worker [2]
#   EXPORT_CENTER_DATABASE_URL           [scripts/mariadb.sh url export_center]
#   EXPORT_CENTER_SAMPLE_DATABASE_URL    TPC-H sample database [the same]
#   EXPORT_CENTER_LOAD_SAMPLE_DATA       load the sample on first start [true]
#   EXPORT_CENTER_ROCKETMQ__ENDPOINT     [scripts/rocketmq.sh endpoint]
#   EXPORT_CENTER_TOPIC_PREFIX           topic prefix the broker has [test-]
#   EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL  [scripts/s3proxy.sh url]
#   EXPORT_CENTER_STORAGE__S3__BUCKET    [export-center]
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  [the S3Proxy test keys]
#   PYTHON                  interpreter with export-center installed [python]
# Any other EXPORT_CENTER_* variable set here reaches every process (docs/settings.md).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER_DIR="${CLUSTER_DIR:-/tmp/export-center-cluster}"
read -r -a API_PORTS <<<"${CLUSTER_API_PORTS:-8001 8002}"
read -r -a METRICS_PORTS <<<"${CLUSTER_METRICS_PORTS:-9101 9102 9103}"
read -r -a API_METRICS_PORTS <<<"${CLUSTER_API_METRICS_PORTS:-9201 9211}"
WORKERS="${CLUSTER_WORKERS:-3}"
API_WORKERS="${CLUSTER_API_WORKERS:-2}"
[ "${#METRICS_PORTS[@]}" -ge "$WORKERS" ] || {
    echo "[cluster] ERROR: CLUSTER_METRICS_PORTS names ${#METRICS_PORTS[@]} ports for $WORKERS workers" >&2
    exit 2
}
PYTHON="${PYTHON:-python}"
START_TIMEOUT=180

log() { echo "[cluster] $(date +%T) $*" >&2; }
die() { echo "[cluster] ERROR: $*" >&2; exit 1; }

# Secrets: generated once (48 random characters each) and kept in $CLUSTER_DIR.
secrets() {
    local file="$CLUSTER_DIR/secrets.env"
    if [ ! -s "$file" ]; then
        mkdir -p "$CLUSTER_DIR"
        umask 077
        {
            echo "EXPORT_CENTER_API__JWT_SECRET=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(36))')"
            echo "EXPORT_CENTER_API__DOWNLOAD_SECRET=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(36))')"
            echo "EXPORT_CENTER_API__MANIFEST_SECRET=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(36))')"
            echo "EXPORT_CENTER_PROVIDER__INTERNAL_TOKEN=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(36))')"
        } >"$file"
    fi
    if ! grep -q '^EXPORT_CENTER_API__MANIFEST_SECRET=' "$file"; then # made before manifests
        echo "EXPORT_CENTER_API__MANIFEST_SECRET=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(36))')" >>"$file"
    fi
    set -a
    # shellcheck disable=SC1090
    . "$file"
    set +a
}

# The settings every process shares.
common_env() {
    secrets
    local start="${CLUSTER_START_SERVERS:-1}"
    export EXPORT_CENTER_ENVIRONMENT=production
    export EXPORT_CENTER_DATA_DIR="${EXPORT_CENTER_DATA_DIR:-$CLUSTER_DIR/data}"
    if [ -z "${EXPORT_CENTER_DATABASE_URL:-}" ]; then
        [ "$start" = 1 ] || die "EXPORT_CENTER_DATABASE_URL is not set"
        EXPORT_CENTER_DATABASE_URL="$(bash "$REPO_ROOT/scripts/mariadb.sh" url export_center)"
        export EXPORT_CENTER_DATABASE_URL
    fi
    export EXPORT_CENTER_TRANSPORT=rocketmq
    export EXPORT_CENTER_ROCKETMQ__ENDPOINT="${EXPORT_CENTER_ROCKETMQ__ENDPOINT:-$(bash "$REPO_ROOT/scripts/rocketmq.sh" endpoint)}"
    export EXPORT_CENTER_TOPIC_PREFIX="${EXPORT_CENTER_TOPIC_PREFIX-test-}"
    export EXPORT_CENTER_STORAGE__BACKEND=s3
    export EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL="${EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL:-$(bash "$REPO_ROOT/scripts/s3proxy.sh" url)}"
    export EXPORT_CENTER_STORAGE__S3__BUCKET="${EXPORT_CENTER_STORAGE__S3__BUCKET:-export-center}"
    export EXPORT_CENTER_STORAGE__S3__REGION="${EXPORT_CENTER_STORAGE__S3__REGION:-us-east-1}"
    export EXPORT_CENTER_STORAGE__S3__PATH_STYLE="${EXPORT_CENTER_STORAGE__S3__PATH_STYLE:-true}"
    export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-$(bash "$REPO_ROOT/scripts/s3proxy.sh" access-key)}"
    export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-$(bash "$REPO_ROOT/scripts/s3proxy.sh" secret-key)}"
    # The sample ORDERS export of every order is a 64 MB CSV (production's cap is 50 MB).
    export EXPORT_CENTER_TASK__MAX_FILE_SIZE_MB="${EXPORT_CENTER_TASK__MAX_FILE_SIZE_MB:-512}"
    # The APIs serve the TPC-H sample providers and the workers call them (provider_url
    # self): production mounts them only when told.
    export EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS="${EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS:-true}"
    # The providers of this recipe take many exports at once (the default is 5 per type).
    export EXPORT_CENTER_LIMITS__MAX_ACTIVE_PER_TYPE="${EXPORT_CENTER_LIMITS__MAX_ACTIVE_PER_TYPE:-50}"
    # One export's shards on every worker, not threads of one interpreter.
    export EXPORT_CENTER_TASK__DISTRIBUTED_SHARDS="${EXPORT_CENTER_TASK__DISTRIBUTED_SHARDS:-${CLUSTER_DISTRIBUTED_SHARDS:-true}}"
    export PYTHONPATH="${PYTHONPATH:-$REPO_ROOT}"
}

start_servers() {
    [ "${CLUSTER_START_SERVERS:-1}" = 1 ] || return 0
    bash "$REPO_ROOT/scripts/mariadb.sh" start
    bash "$REPO_ROOT/scripts/rocketmq.sh" start
    bash "$REPO_ROOT/scripts/s3proxy.sh" start
    bash "$REPO_ROOT/scripts/s3proxy.sh" bucket "${EXPORT_CENTER_STORAGE__S3__BUCKET:-export-center}"
}

pid_of() { cat "$CLUSTER_DIR/pids/$1.pid" 2>/dev/null || true; }
alive() {
    local pid
    pid="$(pid_of "$1")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# launch NAME ARGS...: one export-center process in its own session.
launch() {
    local name="$1"
    shift
    if alive "$name"; then
        log "$name already running (pid $(pid_of "$name"))"
        return 0
    fi
    mkdir -p "$CLUSTER_DIR/pids" "$CLUSTER_DIR/logs"
    [ -f "$CLUSTER_DIR/logs/$name.log" ] && mv -f "$CLUSTER_DIR/logs/$name.log" "$CLUSTER_DIR/logs/$name.log.prev"
    local pid_file="$CLUSTER_DIR/pids/$name.pid" pid
    rm -f "$pid_file"
    # The process writes its own pid (then execs), so the file names the process itself.
    # setsid -w: should setsid have to fork, it still lives as long as the process.
    # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
    setsid -w bash -c 'echo $$ >"$0"; exec "$@"' "$pid_file" \
        env EXPORT_CENTER_INSTANCE_ID="$name" "$@" \
        </dev/null >"$CLUSTER_DIR/logs/$name.log" 2>&1 &
    local launched=$! deadline=$((SECONDS + START_TIMEOUT))
    disown || true
    # On a loaded machine the pid file can take seconds: wait for it as long as the
    # process lives, and never report a pid that is not there.
    until [ -s "$pid_file" ]; do
        if ! kill -0 "$launched" 2>/dev/null && [ ! -s "$pid_file" ]; then
            tail -n 30 "$CLUSTER_DIR/logs/$name.log" >&2
            die "$name exited before it started"
        fi
        [ "$SECONDS" -lt "$deadline" ] || die "$name wrote no pid file in ${START_TIMEOUT}s"
        sleep 0.1
    done
    pid="$(pid_of "$name")"
    [ -n "$pid" ] || die "$name: empty pid file $pid_file"
    log "$name started (pid $pid), log $CLUSTER_DIR/logs/$name.log"
}

wait_http() {
    local name="$1" url="$2" deadline=$((SECONDS + START_TIMEOUT))
    until curl -sf -o /dev/null --max-time 2 "$url"; do
        alive "$name" || { tail -n 30 "$CLUSTER_DIR/logs/$name.log" >&2; die "$name exited"; }
        [ "$SECONDS" -lt "$deadline" ] || die "$name did not answer $url in ${START_TIMEOUT}s"
        sleep 0.3
    done
}

cmd_up() {
    start_servers
    common_env
    log "migrations: export-center db upgrade"
    "$PYTHON" -m export_center.cli db upgrade >&2
    local i
    local serve_metrics
    for i in 0 1; do
        # API: the API, the sample providers and the publisher (a create is sent at once);
        # no consumer, no reconciler. With serve --workers N the publisher runs once, in
        # the supervisor, and N API processes share the port.
        serve_metrics=()
        if [ "$API_WORKERS" -gt 1 ]; then
            serve_metrics=(--workers "$API_WORKERS" --metrics-port "${API_METRICS_PORTS[$i]}")
        fi
        launch "api-$((i + 1))" \
            EXPORT_CENTER_PUBLISHER__ENABLED=true \
            EXPORT_CENTER_CONSUMER__ENABLED=false \
            EXPORT_CENTER_RECONCILER__ENABLED=false \
            EXPORT_CENTER_LOAD_SAMPLE_DATA="${EXPORT_CENTER_LOAD_SAMPLE_DATA:-true}" \
            "$PYTHON" -m export_center.cli serve --port "${API_PORTS[$i]}" "${serve_metrics[@]}"
    done
    for ((i = 0; i < WORKERS; i++)); do
        # Worker: consumer, publisher (retries) and reconciler; its providers are the
        # sample providers of one of the two APIs, alternately.
        launch "worker-$((i + 1))" \
            EXPORT_CENTER_PUBLISHER__ENABLED=true \
            EXPORT_CENTER_CONSUMER__ENABLED=true \
            EXPORT_CENTER_RECONCILER__ENABLED=true \
            EXPORT_CENTER_CONSUMER__CONCURRENCY="${CLUSTER_CONCURRENCY:-2}" \
            EXPORT_CENTER_API__PUBLIC_BASE_URL="http://127.0.0.1:${API_PORTS[$((i % 2))]}" \
            "$PYTHON" -m export_center.cli worker --metrics-port "${METRICS_PORTS[$i]}"
    done
    for i in 0 1; do
        wait_http "api-$((i + 1))" "http://127.0.0.1:${API_PORTS[$i]}/readyz"
    done
    for ((i = 0; i < WORKERS; i++)); do
        wait_http "worker-$((i + 1))" "http://127.0.0.1:${METRICS_PORTS[$i]}/metrics"
    done
    log "up: APIs http://127.0.0.1:${API_PORTS[0]} http://127.0.0.1:${API_PORTS[1]}" \
        "($API_WORKERS API processes each); metrics of the workers on ports" \
        "${METRICS_PORTS[*]:0:$WORKERS}"
}

# The names of the processes this script may have started (also the workers of an
# earlier `up` with more of them).
names() {
    local i
    echo api-1 api-2
    for ((i = 1; i <= ${#METRICS_PORTS[@]} || i <= WORKERS; i++)); do echo "worker-$i"; done
}

cmd_down() {
    local name pid waited
    for name in $(names); do
        alive "$name" || continue
        pid="$(pid_of "$name")"
        kill -TERM "$pid" 2>/dev/null || true
    done
    for name in $(names); do
        pid="$(pid_of "$name")"
        waited=0
        while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do
            if [ "$waited" -ge 600 ]; then
                log "$name (pid $pid) still running after 60 s; SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.1
            waited=$((waited + 1))
        done
        rm -f "$CLUSTER_DIR/pids/$name.pid"
    done
    log "the export-center processes are stopped (servers left running)"
}

cmd_status() {
    local i rc=0
    for i in 0 1; do
        if alive "api-$((i + 1))"; then
            echo "api-$((i + 1)): running (pid $(pid_of "api-$((i + 1))")), http://127.0.0.1:${API_PORTS[$i]}"
        else
            echo "api-$((i + 1)): not running"
            rc=3
        fi
    done
    for ((i = 0; i < WORKERS; i++)); do
        if alive "worker-$((i + 1))"; then
            echo "worker-$((i + 1)): running (pid $(pid_of "worker-$((i + 1))")), metrics http://127.0.0.1:${METRICS_PORTS[$i]}/metrics"
        else
            echo "worker-$((i + 1)): not running"
            rc=3
        fi
    done
    return "$rc"
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env)
        common_env
        env | grep -E '^(EXPORT_CENTER_|AWS_)' | sort \
            | sed -E -e 's/^([^=]*(SECRET|TOKEN|PASSWORD)[^=]*)=.*/\1=***/' \
                -e 's#(://[^:/@]*):[^@]*@#\1:***@#'
        ;;
    dotenv)
        common_env
        umask 077
        env | grep -E '^(EXPORT_CENTER_|AWS_|PYTHONPATH=)' | sort >"$CLUSTER_DIR/cluster.env"
        echo "$CLUSTER_DIR/cluster.env"
        ;;
    token)
        shift
        [ "$#" -eq 2 ] || die "usage: $0 token USER TENANT"
        common_env
        "$PYTHON" -m export_center.cli token --user "$1" --tenant "$2"
        ;;
    *)
        echo "usage: $0 {up|down|status|env|dotenv|token USER TENANT}" >&2
        exit 2
        ;;
esac
