#!/bin/sh
# Render broker.conf from the template with an explicit, client-reachable broker address.
#
#   ROCKETMQ_BROKER_IP=rocketmq-broker render-broker-config.sh [TEMPLATE] [OUTPUT]
#
# Refuses an empty address, localhost, 127.0.0.1 (unless RENDER_PROFILE=test), the raw
# placeholder and anything with an unexpanded ${...}; checks the output has no
# placeholder left (seed 002 §16.1). Exit 0 and the rendered file, or exit 1 and why.
set -eu

template="${1:-/config/broker.conf.template}"
output="${2:-/tmp/broker.conf}"
address="${ROCKETMQ_BROKER_IP:-}"
profile="${RENDER_PROFILE:-production}"

fail() {
    echo "render-broker-config: $*" >&2
    exit 1
}

case "$address" in
    "") fail "ROCKETMQ_BROKER_IP is empty; set a client-reachable address" ;;
    __BROKER_IP__) fail "ROCKETMQ_BROKER_IP is the raw placeholder __BROKER_IP__" ;;
    *'${'* | *'$('* | *'`'*) fail "ROCKETMQ_BROKER_IP contains an unexpanded expression: $address" ;;
    localhost | 127.* | ::1 | 0.0.0.0)
        [ "$profile" = "test" ] || fail "ROCKETMQ_BROKER_IP=$address is loopback; clients elsewhere cannot reach it (allowed only with RENDER_PROFILE=test)"
        ;;
esac
case "$address" in
    *[!A-Za-z0-9._:-]*) fail "ROCKETMQ_BROKER_IP has characters no host name or address has: $address" ;;
esac
[ -r "$template" ] || fail "cannot read the template $template"

sed "s/__BROKER_IP__/$address/g" "$template" >"$output.tmp"
if grep -Eq '__BROKER_IP__|\$\{' "$output.tmp"; then
    grep -nE '__BROKER_IP__|\$\{' "$output.tmp" >&2
    rm -f "$output.tmp"
    fail "the rendered config still contains a placeholder"
fi
mv "$output.tmp" "$output"
echo "render-broker-config: wrote $output with brokerIP1=$address"
