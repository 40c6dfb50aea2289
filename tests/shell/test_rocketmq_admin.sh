#!/usr/bin/env bash
# Shell test of scripts/rocketmq.sh's topic and group creation under load: an admin call
# that fails or hangs is made again with back-off, the broker's listing is checked, and
# the script exits 0 only when every topic and group is there. mqadmin is the stand-in
# tests/shell/fake_mqadmin.sh (EXPORT_CENTER_ROCKETMQ_MQADMIN): no broker, no JVM.
# Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
script=scripts/rocketmq.sh
fake="$PWD/tests/shell/fake_mqadmin.sh"
work=$(mktemp -d)
passed=0
failed=0
COMMAND=test-export-center-command-v1
DLQ_TOPIC=%DLQ%test-export-center-worker-v1

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*"
    [ -f "$case_dir/log" ] && sed 's/^/    /' "$case_dir/log"
}

# ensure NAME ENV...: run `rocketmq.sh ensure` in a fresh home with the fake mqadmin;
# sets code, case_dir (log in $case_dir/log, the fake's state in $case_dir/state).
ensure() {
    local name="$1"
    shift
    case_dir="$work/$name"
    mkdir -p "$case_dir"
    code=0
    env -i PATH="$PATH" HOME="$case_dir" \
        EXPORT_CENTER_ROCKETMQ_HOME="$case_dir/home" \
        EXPORT_CENTER_ROCKETMQ_MQADMIN="$fake" \
        EXPORT_CENTER_TOPIC_PREFIX=test- \
        FAKE_MQADMIN_STATE="$case_dir/state" \
        "$@" bash "$script" ensure >"$case_dir/log" 2>&1 || code=$?
}

calls() { grep -c "^$1 .*$2" "$case_dir/state/calls.log"; }
listed() { grep -qxF -- "$1" "$case_dir/state/$2"; }

# Each create call fails twice (a timeout answer), then succeeds: exit 0, three calls each.
ensure fails-twice FAKE_MQADMIN_FAILS=2
if [ "$code" -eq 0 ]; then ok; else bad "fails twice: exit $code, wanted 0"; fi
for topic in "$COMMAND" "$DLQ_TOPIC"; do
    if [ "$(calls updateTopic "-t $topic")" -eq 3 ] && listed "$topic" topics; then ok; else
        bad "fails twice: $topic not created on the third call"
    fi
done
for group in test-export-center-worker-v1 test-export-center-dlq-handler-v1; do
    if [ "$(calls updateSubGroup "-g $group")" -eq 3 ] && listed "$group" groups; then ok; else
        bad "fails twice: $group not created on the third call"
    fi
done
if grep -q "round 1 of 5.*again in 2s" "$case_dir/log" && grep -q "round 2 of 5.*again in 4s" "$case_dir/log"; then ok; else
    bad "fails twice: no back-off of 2 s then 4 s in the log"
fi
if grep -q "is listed by the broker: ok" "$case_dir/log" && [ "$(calls getConsumerConfig "")" -ge 2 ] \
    && grep -q "topics and groups ready" "$case_dir/log"; then ok; else
    bad "fails twice: the broker's listing was not checked"
fi

# The first call of each hangs (no answer): it is given up after the admin timeout and
# made again.
ensure hangs-once FAKE_MQADMIN_HANG=1 EXPORT_CENTER_ROCKETMQ_ADMIN_TIMEOUT=2
if [ "$code" -eq 0 ] && [ "$(calls updateTopic "-t $COMMAND")" -eq 2 ]; then ok; else
    bad "hangs once: exit $code, wanted 0 after a second call"
fi
left=0
for pid in $(cat "$case_dir/state/hung.pids"); do kill -0 "$pid" 2>/dev/null && left=$((left + 1)); done
if [ "$(wc -l <"$case_dir/state/hung.pids")" -eq 4 ] && [ "$left" -eq 0 ]; then ok; else
    bad "hangs once: $left of the hung admin calls were left running"
fi

# Never succeeds: exit 1 after the attempts, naming what is missing.
ensure always-fails FAKE_MQADMIN_FAILS=99 EXPORT_CENTER_ROCKETMQ_ADMIN_ATTEMPTS=3
if [ "$code" -eq 1 ] && [ "$(calls updateTopic "-t $COMMAND")" -eq 3 ]; then ok; else
    bad "always fails: exit $code after $(calls updateTopic "-t $COMMAND") calls, wanted 1 after 3"
fi
if grep -q "mqadmin failed 3 times: topic $COMMAND" "$case_dir/log" \
    && grep -q "creating the topics and groups failed" "$case_dir/log"; then ok; else
    bad "always fails: the error does not name the topic"
fi

# "success", but the broker does not have the topic afterwards: exit 1, named.
ensure forgets FAKE_MQADMIN_FORGET="$COMMAND" EXPORT_CENTER_ROCKETMQ_ADMIN_ATTEMPTS=2
if [ "$code" -eq 1 ] && grep -q "mqadmin failed 2 times: topic $COMMAND (4 queues, NORMAL) is listed by the broker" "$case_dir/log" \
    && grep -q "the broker does not list every topic and group" "$case_dir/log"; then ok; else
    bad "forgets: exit $code, wanted 1 naming the missing topic"
fi

# First time right: one call each, nothing retried.
ensure healthy
if [ "$code" -eq 0 ] && [ "$(calls updateTopic "-t $COMMAND")" -eq 1 ] && ! grep -q "again in" "$case_dir/log"; then ok; else
    bad "healthy: exit $code, wanted 0 with one call each"
fi

rm -rf "$work"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
