#!/usr/bin/env bash
# Shell test of deploy/rocketmq/render-broker-config.sh: every bad address is refused,
# a good one renders without placeholders. Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
script=deploy/rocketmq/render-broker-config.sh
template=deploy/rocketmq/broker.conf.template
out=$(mktemp -d)
passed=0
failed=0

expect() {  # expect <exit code> <description> <env assignments...>
    local want=$1 what=$2
    shift 2
    local got=0
    env -i PATH="$PATH" "$@" sh "$script" "$template" "$out/broker.conf" >"$out/log" 2>&1 || got=$?
    if [ "$got" -eq "$want" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $what: exit $got, wanted $want"
        cat "$out/log"
    fi
}

expect 1 "unset address"
expect 1 "empty address" ROCKETMQ_BROKER_IP=
expect 1 "localhost" ROCKETMQ_BROKER_IP=localhost
expect 1 "127.0.0.1" ROCKETMQ_BROKER_IP=127.0.0.1
expect 1 "raw placeholder" ROCKETMQ_BROKER_IP=__BROKER_IP__
expect 1 'unexpanded ${...}' 'ROCKETMQ_BROKER_IP=${ROCKETMQ_BROKER_IP}'
expect 1 'command substitution' 'ROCKETMQ_BROKER_IP=$(hostname)'
expect 1 "sed metacharacters" 'ROCKETMQ_BROKER_IP=a/b'
expect 0 "service name" ROCKETMQ_BROKER_IP=rocketmq-broker
if grep -q '^brokerIP1=rocketmq-broker$' "$out/broker.conf" && ! grep -q '__BROKER_IP__' "$out/broker.conf"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: rendered file lacks brokerIP1=rocketmq-broker"
fi
expect 0 "loopback in the test profile" ROCKETMQ_BROKER_IP=127.0.0.1 RENDER_PROFILE=test
sh "$script" /nonexistent "$out/x" >/dev/null 2>&1 && { failed=$((failed + 1)); echo "FAIL: missing template accepted"; } || passed=$((passed + 1))

rm -rf "$out"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
