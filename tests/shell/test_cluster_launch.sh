#!/usr/bin/env bash
# Shell test of deploy/cluster/run.sh's process launch on a loaded machine: a process
# whose pid file takes longer than usual (a slow `setsid`, 6 s) is reported with its
# real pid, never an empty one, on the first `up` and when `up` starts again a worker
# that died. The export-center processes are stand-ins (a PYTHON that answers HTTP on
# the process's port), and no server is started (CLUSTER_START_SERVERS=0).
# Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*"
    sed 's/^/    /' "$work/log"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A `python` for run.sh: `-c` runs the real one; `-m export_center.cli db upgrade`
# succeeds; `serve --port P` and `worker --metrics-port P` answer HTTP 200 on P.
mkdir -p "$work/bin"
cat >"$work/python" <<'PY'
#!/usr/bin/env bash
[ "$1" = -c ] && exec python3 "$@"
case "$3" in
    db) exit 0 ;;
    serve | worker) port="$5" ;;
    *) exit 2 ;;
esac
exec python3 -c '
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
' "$port"
PY
# A `setsid` that takes SLOW_SECONDS before it starts the process named SLOW_NAME.
real_setsid="$(command -v setsid)"
cat >"$work/bin/setsid" <<SH
#!/usr/bin/env bash
case "\$*" in *"/pids/\${SLOW_NAME:-none}.pid"*) sleep "\${SLOW_SECONDS:-0}" ;; esac
exec "$real_setsid" "\$@"
SH
chmod +x "$work/python" "$work/bin/setsid"

export PATH="$work/bin:$PATH" PYTHON="$work/python" CLUSTER_DIR="$work/cluster" \
    CLUSTER_START_SERVERS=0 EXPORT_CENTER_DATABASE_URL="sqlite:///$work/x.db" \
    EXPORT_CENTER_ROCKETMQ__ENDPOINT=127.0.0.1:1 EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL=http://127.0.0.1:1 \
    AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y \
    CLUSTER_API_PORTS="$(free_port) $(free_port)" CLUSTER_METRICS_PORTS="$(free_port) $(free_port) $(free_port)"

# started_pid NAME: the pid the last run's log reports for NAME ("NAME started (pid N)").
started_pid() { sed -n "s/.*\] .* $1 started (pid \([0-9]*\)).*/\1/p" "$work/log" | tail -n 1; }
check_started() {  # check_started NAME WHEN
    local pid file
    pid="$(started_pid "$1")"
    file="$(cat "$CLUSTER_DIR/pids/$1.pid" 2>/dev/null)"
    if grep -q "$1 started (pid )" "$work/log"; then
        bad "$2: $1 reported with an empty pid"
    elif [ -n "$pid" ] && [ "$pid" = "$file" ] && kill -0 "$pid" 2>/dev/null; then
        ok
    else
        bad "$2: $1 reported pid '$pid', pid file '$file'"
    fi
}

SLOW_NAME=api-2 SLOW_SECONDS=6 bash deploy/cluster/run.sh up >"$work/log" 2>&1
code=$?
if [ "$code" -eq 0 ]; then ok; else bad "up: exit $code"; fi
for name in api-1 api-2 worker-1 worker-2 worker-3; do check_started "$name" "up"; done

# worker-2 dies; `up` starts it again, slowly.
old="$(cat "$CLUSTER_DIR/pids/worker-2.pid")"
kill -KILL "$old"
while kill -0 "$old" 2>/dev/null; do sleep 0.1; done
SLOW_NAME=worker-2 SLOW_SECONDS=6 bash deploy/cluster/run.sh up >"$work/log" 2>&1
code=$?
if [ "$code" -eq 0 ]; then ok; else bad "up again: exit $code"; fi
check_started worker-2 "restart"
if [ "$(started_pid worker-2)" != "$old" ] && grep -q "worker-1 already running (pid [0-9]" "$work/log"; then ok; else
    bad "restart: worker-2 not a new process, or the others not left running"
fi
if bash deploy/cluster/run.sh status >"$work/log" 2>&1 && ! grep -q "(pid )" "$work/log"; then ok; else
    bad "status after the restart"
fi

bash deploy/cluster/run.sh down >"$work/log" 2>&1
left=0
for f in "$CLUSTER_DIR"/pids/*.pid; do [ -e "$f" ] && left=$((left + 1)); done
if [ "$left" -eq 0 ]; then ok; else bad "down left $left pid files"; fi

rm -rf "$work"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
