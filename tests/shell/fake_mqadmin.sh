#!/usr/bin/env bash
# A stand-in for RocketMQ's mqadmin (scripts/rocketmq.sh EXPORT_CENTER_ROCKETMQ_MQADMIN)
# for tests/shell/test_rocketmq_admin.sh: it answers like mqadmin 5.x and keeps the
# topics and groups it "created" under $FAKE_MQADMIN_STATE. Like the real one it exits 0
# whatever happened; only its output says.
#
#   FAKE_MQADMIN_FAILS=N    the first N create calls of each topic or group print a
#                           timeout exception instead of "success" (default 0)
#   FAKE_MQADMIN_HANG=N     the first N create calls of each one hang (never answer)
#   FAKE_MQADMIN_FORGET=X   creating topic or group X says success but keeps nothing
set -u
state="${FAKE_MQADMIN_STATE:?}"
mkdir -p "$state"
sub="$1"
shift
echo "$sub $*" >>"$state/calls.log"
name=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[$i]}" in -t | -g) name="${args[$((i + 1))]}" ;; esac
done
case "$sub" in
    clusterList)
        echo "#Cluster Name           #Broker Name            #BID  #Addr"
        echo "ExportCenterCluster     export-center-broker    0     127.0.0.1:10911"
        ;;
    updateTopic | updateSubGroup)
        count_file="$state/count.$(printf '%s' "$name" | md5sum | cut -c1-12)"
        n=$(($(cat "$count_file" 2>/dev/null || echo 0) + 1))
        echo "$n" >"$count_file"
        if [ "$n" -le "${FAKE_MQADMIN_HANG:-0}" ]; then
            echo "$$" >>"$state/hung.pids"
            exec sleep 300
        fi
        if [ "$n" -le $((${FAKE_MQADMIN_HANG:-0} + ${FAKE_MQADMIN_FAILS:-0})) ]; then
            echo "org.apache.rocketmq.tools.command.SubCommandException: UpdateTopicSubCommand command failed"
            echo "Caused by: org.apache.rocketmq.remoting.exception.RemotingTimeoutException: wait response on the channel <127.0.0.1:10911> timeout, 5000(ms)"
            exit 0
        fi
        if [ "$name" != "${FAKE_MQADMIN_FORGET:-}" ]; then
            kind=topics
            [ "$sub" = updateSubGroup ] && kind=groups
            grep -qxF -- "$name" "$state/$kind" 2>/dev/null || echo "$name" >>"$state/$kind"
            if [ "$kind" = groups ]; then
                retry=16
                for ((i = 0; i < ${#args[@]}; i++)); do
                    [ "${args[$i]}" = -r ] && retry="${args[$((i + 1))]}"
                done
                echo "$retry" >"$state/retry.$(printf '%s' "$name" | md5sum | cut -c1-12)"
            fi
        fi
        echo "create topic to 127.0.0.1:10911 success."
        ;;
    topicList)
        echo "SELF_TEST_TOPIC"
        cat "$state/topics" 2>/dev/null
        ;;
    getConsumerConfig)
        if grep -qxF -- "$name" "$state/groups" 2>/dev/null; then
            echo "=============================ExportCenterCluster:export-center-broker============================="
            printf '%-40s=  %s\n' groupName "$name" consumeEnable true \
                retryMaxTimes "$(cat "$state/retry.$(printf '%s' "$name" | md5sum | cut -c1-12)")"
        fi
        ;;
    *) echo "unknown subcommand $sub" ;;
esac
exit 0
