#!/usr/bin/env bash
# Shell test of scripts/python-env.sh, the first step of scripts/test.sh, with real
# interpreters: Debian 12's own python3 is refused (pip would fail with
# externally-managed-environment), a venv made from it passes, and so does the
# interpreter that runs the tests; no `python` at all is refused with the same advice.
# Prints "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
script=scripts/python-env.sh
work=$(mktemp -d)
passed=0
failed=0

expect() {  # expect <exit code> <description> <PATH> [text the output must hold]
    local want=$1 what=$2 path=$3 text=${4:-}
    local got=0
    env -i HOME="$HOME" PATH="$path" bash "$script" >"$work/log" 2>&1 || got=$?
    if [ "$got" -ne "$want" ]; then
        failed=$((failed + 1))
        echo "FAIL: $what: exit $got, wanted $want"
        cat "$work/log"
    elif [ -n "$text" ] && ! grep -qF -- "$text" "$work/log"; then
        failed=$((failed + 1))
        echo "FAIL: $what: the output lacks: $text"
        cat "$work/log"
    else
        passed=$((passed + 1))
    fi
}

system=/usr/bin/python3
if ! "$system" -c 'import sys, sysconfig, pathlib; sys.exit(not (pathlib.Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").is_file())'; then
    failed=$((failed + 1))
    echo "FAIL: $system is not marked externally managed: this test needs Debian 12's python3"
fi
mkdir -p "$work/system" "$work/none"
ln -s "$system" "$work/system/python"
expect 1 "the system python3" "$work/system:/usr/bin:/bin" "externally-managed-environment"
expect 1 "the system python3: the advice" "$work/system:/usr/bin:/bin" "python3 -m venv .venv && . .venv/bin/activate"
"$system" -m venv --without-pip "$work/venv"
expect 0 "a venv of the system python3" "$work/venv/bin:/usr/bin:/bin"
here=$(dirname "$(command -v python)")
expect 0 "the interpreter of these tests" "$here:/usr/bin:/bin"
# The test command itself stops there, before it installs or starts anything.
got=0
env -i HOME="$HOME" PATH="$work/system:/usr/bin:/bin" bash scripts/test.sh >"$work/log" 2>&1 || got=$?
if [ "$got" -eq 1 ] && grep -qF "externally-managed-environment" "$work/log" && ! grep -q "==>" "$work/log"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: scripts/test.sh with the system python3: exit $got"
    cat "$work/log"
fi
ln -s /bin/bash "$work/none/bash"
expect 1 "no python on PATH" "$work/none" "there is no \`python\` on PATH"

rm -rf "$work"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
