#!/usr/bin/env bash
# Private Apache RocketMQ 5.x server for the export center's tests and local development:
# a NameServer plus a Proxy in local mode (the Broker runs embedded in the Proxy's JVM),
# all on 127.0.0.1, built from the Maven Central jars (no distribution zip, no Docker).
#
# Usage: scripts/rocketmq.sh {start|ensure|stop|status|endpoint}
#
#   start     Resolve the server jars with Maven (first run only; cached), write the
#             loopback configuration, start the NameServer and the Proxy in the
#             background, wait until the Broker is registered, then create (idempotently)
#             the command topic, the worker and dead-letter-handler groups and the
#             worker group's DLQ topic, and check that the broker lists each of them.
#             When our processes are already up it only ensures the topics and groups.
#             An admin call that fails or times out (a loaded machine) is made again,
#             with pauses of 2, 4, 8... s, up to EXPORT_CENTER_ROCKETMQ_ADMIN_ATTEMPTS
#             times; `start` exits 0 only once every topic and group is there.
#   ensure    Only the last two steps, against a NameServer that already runs: wait for
#             the Broker, create the topics and groups, check them.
#   stop      Stop the processes this script started (pid files) and wait until they
#             are gone.
#   status    Print the state; exit 0 when the proxy answers, 3 otherwise.
#   endpoint  Print the Proxy's gRPC endpoint (what rocketmq-python-client dials),
#             e.g. 127.0.0.1:8081.
#
# Environment:
#   EXPORT_CENTER_ROCKETMQ_HOME            cache and state directory (jars, configs, store,
#                                          logs, pid files); default
#                                          $HOME/.cache/export-center/rocketmq
#   EXPORT_CENTER_ROCKETMQ_VERSION         server version (default 5.3.3)
#   EXPORT_CENTER_ROCKETMQ_NAMESRV_PORT    NameServer port (default 9876)
#   EXPORT_CENTER_ROCKETMQ_PROXY_PORT      Proxy gRPC port (default 8081)
#   EXPORT_CENTER_ROCKETMQ_PROXY_REMOTING_PORT
#                                          Proxy remoting port (default 18080, not 8080,
#                                          which too many dev servers use)
#   EXPORT_CENTER_ROCKETMQ_BROKER_PORT     Broker remoting port (default 10911; the broker
#                                          also takes port-2 (fast remoting) and port+1 (HA))
#   EXPORT_CENTER_ROCKETMQ_START_TIMEOUT   seconds to wait for the servers (default 180)
#   EXPORT_CENTER_ROCKETMQ_ADMIN_ATTEMPTS  tries of each topic or group call (default 5)
#   EXPORT_CENTER_ROCKETMQ_ADMIN_TIMEOUT   seconds one admin call may take (default 60)
#   EXPORT_CENTER_ROCKETMQ_MQADMIN         an mqadmin command to use instead of the server
#                                          jars' MQAdminStartup, e.g. the bin/mqadmin of a
#                                          RocketMQ distribution; it is given mqadmin's
#                                          arguments followed by -n NAMESRV_ADDR
#   EXPORT_CENTER_TOPIC_PREFIX             environment prefix of topic and group names
#                                          (default test-)
#
# Resources created by `start` (PREFIX = $EXPORT_CENTER_TOPIC_PREFIX):
#   topic   ${PREFIX}export-center-command-v1        4 queues, message.type=NORMAL
#   group   ${PREFIX}export-center-worker-v1         retryMaxTimes 2: a message never
#                                                    acked is delivered 3 times, then
#                                                    moved to the DLQ topic below
#   group   ${PREFIX}export-center-dlq-handler-v1
#   topic   %DLQ%${PREFIX}export-center-worker-v1    1 queue, perm 6 (read-write)
#
# Logs: $HOME_DIR/namesrv.out and proxy.out (stdout/stderr of the JVMs) and the
# RocketMQ log files under $HOME_DIR/home/logs/rocketmqlogs/ (namesrv.log, proxy.log,
# broker.log, pop.log, ...). It is a test server: small heaps, small store files, async
# flush, disk-usage guards raised; never a place for messages you want to keep.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM_SRC="$REPO_ROOT/deploy/rocketmq/test-server/pom.xml"

HOME_DIR="${EXPORT_CENTER_ROCKETMQ_HOME:-$HOME/.cache/export-center/rocketmq}"
VERSION="${EXPORT_CENTER_ROCKETMQ_VERSION:-5.3.3}"
NAMESRV_PORT="${EXPORT_CENTER_ROCKETMQ_NAMESRV_PORT:-9876}"
PROXY_PORT="${EXPORT_CENTER_ROCKETMQ_PROXY_PORT:-8081}"
PROXY_REMOTING_PORT="${EXPORT_CENTER_ROCKETMQ_PROXY_REMOTING_PORT:-18080}"
BROKER_PORT="${EXPORT_CENTER_ROCKETMQ_BROKER_PORT:-10911}"
START_TIMEOUT="${EXPORT_CENTER_ROCKETMQ_START_TIMEOUT:-180}"
ADMIN_ATTEMPTS="${EXPORT_CENTER_ROCKETMQ_ADMIN_ATTEMPTS:-5}"
ADMIN_TIMEOUT="${EXPORT_CENTER_ROCKETMQ_ADMIN_TIMEOUT:-60}"
MQADMIN="${EXPORT_CENTER_ROCKETMQ_MQADMIN:-}"
STOP_TIMEOUT=60
PREFIX="${EXPORT_CENTER_TOPIC_PREFIX:-test-}"

CLUSTER="ExportCenterCluster"
BROKER_NAME="export-center-broker"
NAMESRV_ADDR="127.0.0.1:$NAMESRV_PORT"

COMMAND_TOPIC="${PREFIX}export-center-command-v1"
WORKER_GROUP="${PREFIX}export-center-worker-v1"
DLQ_GROUP="${PREFIX}export-center-dlq-handler-v1"
DLQ_TOPIC="%DLQ%${WORKER_GROUP}"
WORKER_RETRY_MAX_TIMES=2

LIB_DIR="$HOME_DIR/lib"
CONF_DIR="$HOME_DIR/conf"
STORE_DIR="$HOME_DIR/store"
JVM_HOME_DIR="$HOME_DIR/home" # -Duser.home: RocketMQ writes its logs to ~/logs/rocketmqlogs
LOG_DIR="$JVM_HOME_DIR/logs/rocketmqlogs"
LOCK_FILE="$HOME_DIR/script.lock"

NAMESRV_MAIN="org.apache.rocketmq.namesrv.NamesrvStartup"
PROXY_MAIN="org.apache.rocketmq.proxy.ProxyStartup"
ADMIN_MAIN="org.apache.rocketmq.tools.command.MQAdminStartup"

log() { echo "[rocketmq.sh] $(date +%T) $*" >&2; }
die() { echo "[rocketmq.sh] ERROR: $*" >&2; exit 1; }

# Print the tail of every log that can explain a failure, then fail.
fail_with_logs() {
    echo "[rocketmq.sh] ERROR: $*" >&2
    local f
    for f in "$HOME_DIR/namesrv.out" "$HOME_DIR/proxy.out" "$LOG_DIR/namesrv.log" \
        "$LOG_DIR/proxy.log" "$LOG_DIR/broker.log" "$LOG_DIR/broker_default.log"; do
        [ -s "$f" ] || continue
        echo "[rocketmq.sh] --- last 30 lines of $f ---" >&2
        tail -n 30 "$f" >&2
    done
    echo "[rocketmq.sh] --- end of logs ---" >&2
    echo "[rocketmq.sh] processes that did start are left running for inspection;" \
        "'$0 stop' stops them, '$0 start' waits for them again" >&2
    exit 1
}

# ---------------------------------------------------------------------------
# Tools: java (17) and maven

install_packages() {
    local pkgs=()
    command -v java >/dev/null 2>&1 || pkgs+=(openjdk-17-jre-headless)
    command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
    [ "${#pkgs[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "missing ${pkgs[*]} and apt-get is not available"
    local sudo=""
    if [ "$(id -u)" != "0" ]; then
        command -v sudo >/dev/null 2>&1 || die "missing ${pkgs[*]}; run as root to install"
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    log "installing ${pkgs[*]} with apt-get"
    if ! $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}"; then
        $sudo apt-get update -q
        $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}"
    fi
}

# Resolve the server jars into $LIB_DIR unless the same pom and version are there.
ensure_jars() {
    local stamp want
    want="$VERSION $(sha256sum "$POM_SRC" | cut -d' ' -f1)"
    stamp="$LIB_DIR/.resolved"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
        && compgen -G "$LIB_DIR/rocketmq-proxy-$VERSION.jar" >/dev/null; then
        return 0
    fi
    log "resolving RocketMQ $VERSION server jars from Maven Central into $LIB_DIR"
    rm -rf "$LIB_DIR" "$HOME_DIR/maven"
    mkdir -p "$HOME_DIR/maven"
    # Maven runs on a copy so nothing (target/, ...) is written into the checkout.
    cp "$POM_SRC" "$HOME_DIR/maven/pom.xml"
    local t0=$SECONDS
    if ! (cd "$HOME_DIR/maven" && mvn -q -B -Dstyle.color=never \
        -Drocketmq.version="$VERSION" dependency:copy-dependencies \
        -DoutputDirectory="$LIB_DIR" -DincludeScope=runtime) >"$HOME_DIR/maven.log" 2>&1; then
        tail -n 40 "$HOME_DIR/maven.log" >&2
        rm -rf "$LIB_DIR"
        die "mvn dependency:copy-dependencies failed (full log: $HOME_DIR/maven.log)"
    fi
    [ -f "$LIB_DIR/rocketmq-proxy-$VERSION.jar" ] \
        || die "rocketmq-proxy-$VERSION.jar missing after the Maven run"
    echo "$want" >"$stamp"
    log "resolved $(find "$LIB_DIR" -name '*.jar' | wc -l) jars in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------
# Configuration (rewritten on every start, so a changed port takes effect)

write_configs() {
    mkdir -p "$CONF_DIR" "$STORE_DIR" "$JVM_HOME_DIR" "$HOME_DIR/namesrv"
    cat >"$CONF_DIR/namesrv.properties" <<EOF
# Written by scripts/rocketmq.sh; rewritten on every start.
listenPort=$NAMESRV_PORT
bindAddress=127.0.0.1
rocketmqHome=$HOME_DIR
kvConfigPath=$HOME_DIR/namesrv/kvConfig.json
configStorePath=$HOME_DIR/namesrv/namesrv.properties
EOF

    cat >"$CONF_DIR/broker.conf" <<EOF
# Written by scripts/rocketmq.sh; rewritten on every start.
brokerClusterName=$CLUSTER
brokerName=$BROKER_NAME
brokerId=0
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
# Local mode hands gRPC clients brokerIP1:grpcServerPort as the route: keep it loopback.
brokerIP1=127.0.0.1
bindAddress=127.0.0.1
listenPort=$BROKER_PORT
namesrvAddr=$NAMESRV_ADDR
rocketmqHome=$HOME_DIR
storePathRootDir=$STORE_DIR
# Topics and groups only through this script's mqadmin calls: a typo must fail loudly.
autoCreateTopicEnable=false
autoCreateSubscriptionGroup=false
# Small store files (defaults: commit log 1 GiB, consume queue 6 MB, timer log 100 MiB).
mappedFileSizeCommitLog=67108864
mappedFileSizeConsumeQueue=60000
mappedFileSizeTimerLog=8388608
maxHashSlotNum=10000
maxIndexNum=40000
fileReservedTime=24
# The disk guards look at the whole partition: the defaults (75/85/90 %) stop writes on
# a crowded developer or CI disk.
diskMaxUsedSpaceRatio=95
diskSpaceCleanForciblyRatio=97
diskSpaceWarningLevelRatio=98
EOF

    cat >"$CONF_DIR/rmq-proxy.json" <<EOF
{
  "rocketMQClusterName": "$CLUSTER",
  "proxyMode": "LOCAL",
  "namesrvAddr": "$NAMESRV_ADDR",
  "grpcServerPort": $PROXY_PORT,
  "remotingListenPort": $PROXY_REMOTING_PORT,
  "localServeAddr": "127.0.0.1",
  "enablePrintJstack": false
}
EOF
}

# ---------------------------------------------------------------------------
# Processes

# java_cmd LOGBACK_XML: set JAVA_CMD to the common java command line. LOGBACK_XML is the
# component's logback resource (each jar carries its own; on one merged classpath every
# JVM would otherwise pick the proxy's).
java_cmd() {
    JAVA_CMD=(java -server -Duser.home="$JVM_HOME_DIR" -Drocketmq.home.dir="$HOME_DIR"
        -Drmq.logback.configurationFile="$1" -cp "$LIB_DIR/*")
}

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" >/dev/null 2>&1; }

# pid_alive NAME MAIN_CLASS: the pid file names a live JVM running MAIN_CLASS (a reused
# pid of some other process does not count).
pid_alive() {
    local pid_file="$HOME_DIR/$1.pid" pid
    [ -f "$pid_file" ] || return 1
    pid="$(cat "$pid_file" 2>/dev/null || true)"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$2"
}

# launch NAME MAIN_CLASS JAVA_ARGS...: start one JVM in its own session, stdout/stderr
# to $HOME_DIR/NAME.out, pid (written by the process itself before exec) to NAME.pid.
launch() {
    local name="$1"
    shift
    local pid_file="$HOME_DIR/$name.pid" out="$HOME_DIR/$name.out"
    rm -f "$pid_file"
    [ -f "$out" ] && mv -f "$out" "$out.prev"
    # setsid: the servers must outlive this shell and never get its signals (Ctrl-C in
    # pytest must not take the broker down); 9>&- keeps the start lock from being
    # inherited.
    # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
    # setsid -w: should setsid have to fork, it still lives as long as the server.
    ROCKETMQ_HOME="$HOME_DIR" setsid -w bash -c 'echo $$ >"$0"; exec "$@"' "$pid_file" "$@" \
        </dev/null >"$out" 2>&1 9>&- &
    local launched=$!
    disown || true
    # Under load the pid file can take seconds: wait as long as the process lives.
    while [ ! -s "$pid_file" ]; do
        kill -0 "$launched" 2>/dev/null || [ -s "$pid_file" ] \
            || fail_with_logs "$name exited before it wrote its pid file"
        [ "$SECONDS" -lt "$DEADLINE" ] \
            || fail_with_logs "$name did not write its pid file within ${START_TIMEOUT}s"
        sleep 0.1
    done
}

# wait_for NAME MAIN_CLASS MARKER: until MARKER appears in NAME.out.
wait_for() {
    local name="$1" main="$2" marker="$3"
    while ! grep -q "$marker" "$HOME_DIR/$name.out" 2>/dev/null; do
        pid_alive "$name" "$main" || fail_with_logs "$name exited during startup"
        [ "$SECONDS" -lt "$DEADLINE" ] \
            || fail_with_logs "$name did not print '$marker' within ${START_TIMEOUT}s"
        sleep 1
    done
}

start_namesrv() {
    if pid_alive namesrv "$NAMESRV_MAIN"; then
        log "NameServer already running (pid $(cat "$HOME_DIR/namesrv.pid"))"
        return 0
    fi
    port_open "$NAMESRV_PORT" \
        && die "port $NAMESRV_PORT is taken by a process this script did not start"
    log "starting NameServer on $NAMESRV_ADDR"
    java_cmd rmq.namesrv.logback.xml
    launch namesrv "${JAVA_CMD[@]}" -XX:+UseG1GC -Xms256m -Xmx256m \
        "$NAMESRV_MAIN" -c "$CONF_DIR/namesrv.properties"
    wait_for namesrv "$NAMESRV_MAIN" "boot success"
    log "NameServer up"
}

start_proxy() {
    if pid_alive proxy "$PROXY_MAIN"; then
        log "Proxy already running (pid $(cat "$HOME_DIR/proxy.pid"))"
        return 0
    fi
    local port
    for port in "$PROXY_PORT" "$PROXY_REMOTING_PORT" "$BROKER_PORT" \
        $((BROKER_PORT - 2)) $((BROKER_PORT + 1)); do
        port_open "$port" && die "port $port is taken by a process this script did not start"
    done
    log "starting Proxy (local mode, embedded Broker) on gRPC 127.0.0.1:$PROXY_PORT"
    java_cmd rmq.proxy.logback.xml
    launch proxy "${JAVA_CMD[@]}" -XX:+UseG1GC -Xms512m -Xmx512m \
        -XX:MaxDirectMemorySize=512m "$PROXY_MAIN" -pm local -n "$NAMESRV_ADDR" \
        -bc "$CONF_DIR/broker.conf" -pc "$CONF_DIR/rmq-proxy.json"
    wait_for proxy "$PROXY_MAIN" "startup successfully"
    log "Proxy up"
}

# mqadmin (MQAdminStartup) quirks handled here:
# - its exit code means nothing: it prints exceptions and exits 0, so the output is
#   checked ("success", the broker line of clusterList);
# - a JVM has its answer after ~1.5 s but needs ~3 s more to exit (Netty's graceful
#   shutdown of its event loops), so the commands run in the background with their
#   output in a file, the script goes on as soon as the expected line is there and the
#   JVM finishes exiting on its own; the independent create commands run in parallel.

# admin_bg OUT SUBCOMMAND ARGS...: start mqadmin (or $MQADMIN) against our NameServer in
# the background with its output in OUT; sets ADMIN_PID.
admin_bg() {
    local out="$1" JAVA_CMD
    shift
    if [ -n "$MQADMIN" ]; then
        ROCKETMQ_HOME="$HOME_DIR" "$MQADMIN" "$@" -n "$NAMESRV_ADDR" \
            </dev/null >"$out" 2>&1 9>&- &
        ADMIN_PID=$!
        return 0
    fi
    java_cmd rmq.tools.logback.xml
    ROCKETMQ_HOME="$HOME_DIR" "${JAVA_CMD[@]}" -XX:+UseSerialGC -Xms64m -Xmx256m \
        -XX:TieredStopAtLevel=1 "$ADMIN_MAIN" "$@" -n "$NAMESRV_ADDR" \
        </dev/null >"$out" 2>&1 9>&- &
    ADMIN_PID=$!
}

# admin_result OUT PID REGEX TIMEOUT: 0 as soon as REGEX is in OUT; 1 when the process
# ended without printing it or TIMEOUT seconds passed (the process is then killed).
admin_result() {
    local out="$1" pid="$2" re="$3" end=$((SECONDS + $4))
    while :; do
        grep -q -- "$re" "$out" 2>/dev/null && return 0
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null || true
            grep -q -- "$re" "$out" 2>/dev/null && return 0
            return 1
        fi
        if [ "$SECONDS" -ge "$end" ]; then
            kill "$pid" 2>/dev/null || true
            return 1
        fi
        sleep 0.2
    done
}

wait_for_broker() {
    local out="$HOME_DIR/admin.clusterList.out" re
    re="$BROKER_NAME .*127\.0\.0\.1:$BROKER_PORT"
    while :; do
        admin_bg "$out" clusterList
        if admin_result "$out" "$ADMIN_PID" "$re" 60; then
            log "broker $BROKER_NAME registered (clusterList)"
            return 0
        fi
        # (`ensure` may run against a broker this script did not start: no pid file)
        if [ -f "$HOME_DIR/proxy.pid" ] && ! pid_alive proxy "$PROXY_MAIN"; then
            fail_with_logs "the Proxy exited"
        fi
        if [ "$SECONDS" -ge "$DEADLINE" ]; then
            cat "$out" >&2
            fail_with_logs "broker $BROKER_NAME not in clusterList within ${START_TIMEOUT}s"
        fi
        sleep 2
    done
}

# re_line TEXT: TEXT as a basic regular expression that matches it literally.
re_line() { printf '%s' "$1" | sed 's/[][\.*^$/]/\\&/g'; }

# The four resources: create_call I starts the I-th creation (admin_bg), create_re I is
# what its output says when it worked, create_what I names it.
create_call() {
    local out="$HOME_DIR/admin.$1.out"
    case "$1" in
        0) admin_bg "$out" updateTopic -c "$CLUSTER" -t "$COMMAND_TOPIC" \
            -r 4 -w 4 -p 6 -a "+message.type=NORMAL" ;;
        1) admin_bg "$out" updateSubGroup -c "$CLUSTER" -g "$WORKER_GROUP" \
            -r "$WORKER_RETRY_MAX_TIMES" ;;
        2) admin_bg "$out" updateSubGroup -c "$CLUSTER" -g "$DLQ_GROUP" ;;
        # -r 1 -w 1: the broker's own DLQ topics have one queue (updateTopic defaults to 8).
        3) admin_bg "$out" updateTopic -c "$CLUSTER" -t "$DLQ_TOPIC" -r 1 -w 1 -p 6 ;;
    esac
}
create_re() { echo "success"; }
create_what() {
    case "$1" in
        0) echo "topic $COMMAND_TOPIC (4 queues, NORMAL)" ;;
        1) echo "group $WORKER_GROUP (retryMaxTimes $WORKER_RETRY_MAX_TIMES)" ;;
        2) echo "group $DLQ_GROUP" ;;
        3) echo "topic $DLQ_TOPIC (1 queue, perm 6)" ;;
    esac
}

# The same four, as the broker lists them afterwards: topicList names each topic on a
# line of its own; getConsumerConfig prints a group's settings (nothing when it does
# not exist), the worker group's with its retry limit.
check_call() {
    local out="$HOME_DIR/admin.check.$1.out"
    case "$1" in
        0 | 3) admin_bg "$out" topicList ;;
        1) admin_bg "$out" getConsumerConfig -g "$WORKER_GROUP" ;;
        2) admin_bg "$out" getConsumerConfig -g "$DLQ_GROUP" ;;
    esac
}
check_re() {
    case "$1" in
        0) echo "^$(re_line "$COMMAND_TOPIC")\$" ;;
        1) echo "^retryMaxTimes *= *$WORKER_RETRY_MAX_TIMES\$" ;;
        2) echo "^groupName *= *$(re_line "$DLQ_GROUP")\$" ;;
        3) echo "^$(re_line "$DLQ_TOPIC")\$" ;;
    esac
}
check_what() { echo "$(create_what "$1") is listed by the broker"; }

# admin_rounds KIND: run ${KIND}_call for 0..3 in parallel; the calls whose output does
# not show ${KIND}_re (an error, or no answer within ADMIN_TIMEOUT s) are made again
# after 2, 4, 8... s, up to ADMIN_ATTEMPTS rounds. Fails with their outputs when some
# never succeed.
admin_rounds() {
    local kind="$1" round=1 pause=2 i
    local -a todo=(0 1 2 3) left pids
    while :; do
        pids=()
        for i in "${todo[@]}"; do
            "${kind}_call" "$i"
            pids[i]=$ADMIN_PID
        done
        left=()
        for i in "${todo[@]}"; do
            local out="$HOME_DIR/admin.$i.out"
            [ "$kind" = check ] && out="$HOME_DIR/admin.check.$i.out"
            if admin_result "$out" "${pids[$i]}" "$("${kind}_re" "$i")" "$ADMIN_TIMEOUT"; then
                log "$("${kind}_what" "$i"): ok"
            else
                left+=("$i")
            fi
        done
        [ "${#left[@]}" -eq 0 ] && return 0
        if [ "$round" -ge "$ADMIN_ATTEMPTS" ]; then
            for i in "${left[@]}"; do
                local out="$HOME_DIR/admin.$i.out"
                [ "$kind" = check ] && out="$HOME_DIR/admin.check.$i.out"
                echo "[rocketmq.sh] mqadmin failed $round times: $("${kind}_what" "$i"):" >&2
                cat "$out" >&2
            done
            return 1
        fi
        log "mqadmin did not confirm ${#left[@]} of them (round $round of $ADMIN_ATTEMPTS;" \
            "a busy broker or machine): again in ${pause}s"
        sleep "$pause"
        pause=$((pause * 2))
        round=$((round + 1))
        todo=("${left[@]}")
    done
}

ensure_resources() {
    admin_rounds create || fail_with_logs "creating the topics and groups failed"
    admin_rounds check || fail_with_logs "the broker does not list every topic and group"
}

# ---------------------------------------------------------------------------
# Commands

cmd_ensure() {
    mkdir -p "$HOME_DIR"
    exec 9>"$LOCK_FILE"
    flock -w 600 9 || die "could not lock $LOCK_FILE"
    DEADLINE=$((SECONDS + START_TIMEOUT))
    wait_for_broker
    ensure_resources
    log "topics and groups ready on NameServer $NAMESRV_ADDR"
}

cmd_start() {
    install_packages
    [ -f "$POM_SRC" ] || die "missing $POM_SRC"
    mkdir -p "$HOME_DIR"
    # Serialize concurrent `start` calls (parallel CI jobs, two terminals).
    exec 9>"$LOCK_FILE"
    flock -w 600 9 || die "could not lock $LOCK_FILE"
    local t0=$SECONDS
    ensure_jars
    DEADLINE=$((SECONDS + START_TIMEOUT))
    write_configs
    start_namesrv
    start_proxy
    wait_for_broker
    ensure_resources
    log "RocketMQ $VERSION is up in $((SECONDS - t0))s: gRPC endpoint 127.0.0.1:$PROXY_PORT," \
        "NameServer $NAMESRV_ADDR, home $HOME_DIR"
}

# stop_one NAME MAIN_CLASS
stop_one() {
    local name="$1" main="$2" pid waited=0
    if ! pid_alive "$name" "$main"; then
        rm -f "$HOME_DIR/$name.pid"
        log "$name not running"
        return 0
    fi
    pid="$(cat "$HOME_DIR/$name.pid")"
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" # each JVM has a shutdown hook that flushes and unregisters
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge "$STOP_TIMEOUT" ]; then
            log "$name (pid $pid) still running after ${STOP_TIMEOUT}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 1
            break
        fi
        sleep 1
        waited=$((waited + 1))
    done
    rm -f "$HOME_DIR/$name.pid"
    log "$name stopped"
}

cmd_stop() {
    mkdir -p "$HOME_DIR"
    exec 9>"$LOCK_FILE"
    flock -w 600 9 || die "could not lock $LOCK_FILE"
    stop_one proxy "$PROXY_MAIN" # the Broker lives in the Proxy's JVM
    stop_one namesrv "$NAMESRV_MAIN"
}

cmd_status() {
    local name main state rc=0
    for name in namesrv proxy; do
        [ "$name" = namesrv ] && main="$NAMESRV_MAIN" || main="$PROXY_MAIN"
        if pid_alive "$name" "$main"; then
            state="running (pid $(cat "$HOME_DIR/$name.pid"))"
        else
            state="not running"
        fi
        echo "$name: $state"
    done
    if port_open "$NAMESRV_PORT"; then
        echo "namesrv port $NAMESRV_ADDR: open"
    else
        echo "namesrv port $NAMESRV_ADDR: closed"
    fi
    if port_open "$PROXY_PORT"; then
        echo "proxy gRPC endpoint 127.0.0.1:$PROXY_PORT: open"
    else
        echo "proxy gRPC endpoint 127.0.0.1:$PROXY_PORT: closed"
        rc=3
    fi
    echo "home: $HOME_DIR (logs: $LOG_DIR)"
    return "$rc"
}

case "${1:-}" in
    start) cmd_start ;;
    ensure) cmd_ensure ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    endpoint) echo "127.0.0.1:$PROXY_PORT" ;;
    *)
        echo "usage: $0 {start|ensure|stop|status|endpoint}" >&2
        exit 2
        ;;
esac
