#!/usr/bin/env bash
# THE test command of the export center (README "Tests"): checks that `python` is one pip
# may install into (scripts/python-env.sh: a venv on Debian 12 / Ubuntu 23.04+), installs
# the package with its test extras, starts the private MariaDB test server (scripts/mariadb.sh) and runs
# pytest with every argument passed through:
#
#   bash scripts/test.sh                      # whole suite
#   bash scripts/test.sh tests/unit -x -q     # a subset
#
# With EXPORT_CENTER_TEST_MARIADB_URL exported, the `mariadb` tests run against that
# server; in CI (CI=true) they fail instead of skipping when it is missing. The same
# holds for the broker (scripts/rocketmq.sh, EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT) and
# S3Proxy (scripts/s3proxy.sh, EXPORT_CENTER_TEST_S3_ENDPOINT and its keys).
# Exit code: pytest's, except "no tests collected" (5), which is a failure here (1).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

# A Python that pip may install into: a venv (README "Try it"), not Debian's or Ubuntu's
# system python3, which refuses with externally-managed-environment (PEP 668).
bash scripts/python-env.sh

# pip install takes ~10 s even when nothing changed, so locally it is skipped while
# pyproject.toml and the interpreter are the same as at the last successful install and
# the packages still import from this checkout. CI (CI=true) and
# EXPORT_CENTER_FORCE_PIP_INSTALL=1 always install.
stamp_dir=".export-center"
stamp_file="$stamp_dir/pip-install.stamp"
stamp="$(python -c 'import sys; print(sys.executable)') $(sha256sum pyproject.toml | cut -d' ' -f1)"
installed_here() {
    python - "$PWD" <<'PY' >/dev/null 2>&1
import sys
from pathlib import Path

import export_center
import providers
import pytest  # noqa: F401
import pytest_timeout  # noqa: F401
import xdist  # noqa: F401
import hypothesis  # noqa: F401
import rocketmq  # noqa: F401
import boto3  # noqa: F401
import ruff  # noqa: F401
import mypy  # noqa: F401
import playwright  # noqa: F401

root = Path(sys.argv[1]).resolve()
for module in (export_center, providers):
    assert root in Path(module.__file__).resolve().parents, module.__file__
PY
}
ci_mode=false
case "${CI:-}" in "" | 0 | false | False | FALSE | no) ;; *) ci_mode=true ;; esac
if [ "$ci_mode" = false ] && [ "${EXPORT_CENTER_FORCE_PIP_INSTALL:-}" != 1 ] \
    && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] && installed_here; then
    step "export-center already installed with test extras (pyproject.toml unchanged)"
else
    step "Installing export-center with test extras (pip install -e '.[test]')"
    python -m pip install -q --disable-pip-version-check -e '.[test]'
    mkdir -p "$stamp_dir"
    echo "$stamp" >"$stamp_file"
fi

# apt_install PACKAGE...: Debian packages, as root or with sudo, updating the package
# lists only when the first try fails.
apt_install() {
    local sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get install -y -qq "$@" >/dev/null 2>&1 \
        || { $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq "$@" >/dev/null; }
}

# libfaketime runs a worker whose clock is 5 minutes ahead (tests/integration/test_crash_recovery.py).
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]; then
    step "Installing faketime from Debian's packages"
    apt_install faketime
fi

# Debian's prometheus package provides promtool (alert-rule tests) and the prometheus
# server the alert tests start on loopback (tests/support/prometheus.py); with CI set they fail
# without it. --no-install-recommends: the node exporter is not needed.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
    step "Installing prometheus (promtool) from Debian's packages"
    apt_install --no-install-recommends prometheus
fi

# Debian's Chromium runs the browser tests of the download center (tests/browser); with
# CI set they fail without it. Playwright's own browser download is not used.
if ! command -v chromium >/dev/null 2>&1; then
    step "Installing chromium from Debian's packages"
    apt_install chromium
fi

step "Static checks: ruff check, ruff format --check, mypy --strict"
lint_dirs=(export_center providers tests scripts bench)
python -m ruff check "${lint_dirs[@]}"
python -m ruff format --check "${lint_dirs[@]}"
python -m mypy

step "Starting the MariaDB test server (scripts/mariadb.sh start)"
bash scripts/mariadb.sh start
EXPORT_CENTER_TEST_MARIADB_URL="$(bash scripts/mariadb.sh url)"
export EXPORT_CENTER_TEST_MARIADB_URL
echo "EXPORT_CENTER_TEST_MARIADB_URL=$EXPORT_CENTER_TEST_MARIADB_URL"

step "Starting the RocketMQ test broker (scripts/rocketmq.sh start)"
bash scripts/rocketmq.sh start
EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT="$(bash scripts/rocketmq.sh endpoint)"
export EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT
echo "EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT=$EXPORT_CENTER_TEST_ROCKETMQ_ENDPOINT"

step "Starting the S3Proxy test server (scripts/s3proxy.sh start)"
bash scripts/s3proxy.sh start
EXPORT_CENTER_TEST_S3_ENDPOINT="$(bash scripts/s3proxy.sh url)"
EXPORT_CENTER_TEST_S3_ACCESS_KEY="$(bash scripts/s3proxy.sh access-key)"
EXPORT_CENTER_TEST_S3_SECRET_KEY="$(bash scripts/s3proxy.sh secret-key)"
export EXPORT_CENTER_TEST_S3_ENDPOINT EXPORT_CENTER_TEST_S3_ACCESS_KEY EXPORT_CENTER_TEST_S3_SECRET_KEY
echo "EXPORT_CENTER_TEST_S3_ENDPOINT=$EXPORT_CENTER_TEST_S3_ENDPOINT"

# The whole suite (no arguments) runs as three pytest processes at once, each with its own
# log: the RocketMQ tests (-m rocketmq: they share one broker, some stop it, so they run
# one at a time) with the long tests marked second_process; the slow_idle tests, which
# wait on the wall clock; and everything else, which
# pytest-xdist spreads over EXPORT_CENTER_TEST_REST_WORKERS (2) worker processes, a test
# file at a time (--dist loadfile: a file's fixtures and order stay together). Much of
# the suite waits on servers, browsers and subprocesses, so they overlap well on 2 cores.
# With arguments, one pytest runs them as given.
if [ "$#" -eq 0 ] && [ "${EXPORT_CENTER_TEST_SPLIT:-1}" = "1" ]; then
    logs="$(mktemp -d)"
    rest_workers="${EXPORT_CENTER_TEST_REST_WORKERS:-2}"
    step "Running pytest -rs in three processes: -m 'rocketmq or second_process' (log $logs/broker.log), -m slow_idle (log $logs/idle.log) and the rest ($rest_workers workers)"
    started=$SECONDS
    (
        status=0
        EXPORT_CENTER_TEST_GROUP=broker python -m pytest -rs -p no:cacheprovider --durations=25 \
            -m "(rocketmq or second_process) and not slow_idle" \
            --basetemp "$logs/tmp-broker" >"$logs/broker.log" 2>&1 || status=$?
        echo "the RocketMQ and second_process group took $((SECONDS - started)) s" >>"$logs/broker.log"
        exit "$status"
    ) &
    broker_pid=$!
    # The slow_idle tests wait on the wall clock (minutes of a schedule firing once a
    # minute) and use little CPU, so they run beside the other two groups. pytest exit
    # code 5 (none collected) is not a failure of this group.
    (
        status=0
        EXPORT_CENTER_TEST_GROUP=idle python -m pytest -rs -p no:cacheprovider --durations=10 \
            -m slow_idle --basetemp "$logs/tmp-idle" >"$logs/idle.log" 2>&1 || status=$?
        echo "the slow_idle group took $((SECONDS - started)) s" >>"$logs/idle.log"
        [ "$status" -eq 5 ] && status=0
        exit "$status"
    ) &
    idle_pid=$!
    status=0
    EXPORT_CENTER_TEST_GROUP=rest python -m pytest -rs --durations=40 -n "$rest_workers" \
        --dist loadfile -m "not rocketmq and not second_process and not slow_idle" \
        --basetemp "$logs/tmp-rest" || status=$?
    echo "the rest took $((SECONDS - started)) s"
    broker_status=0
    wait "$broker_pid" || broker_status=$?
    step "The RocketMQ and second_process tests: pytest exit code $broker_status"
    cat "$logs/broker.log"
    idle_status=0
    wait "$idle_pid" || idle_status=$?
    step "The slow_idle tests: pytest exit code $idle_status"
    cat "$logs/idle.log"
    [ "$status" -eq 0 ] && status=$broker_status
    [ "$status" -eq 0 ] && status=$idle_status
else
    step "Running pytest -rs $*"
    status=0
    python -m pytest -rs "$@" || status=$?
fi

if [ "$status" -eq 5 ]; then
    echo "ERROR: no tests collected (pytest exit code 5); treating it as a failure" >&2
    exit 1
fi
if [ "$status" -eq 0 ]; then
    step "Tests passed"
else
    step "Tests failed (pytest exit code $status)"
fi
exit "$status"
