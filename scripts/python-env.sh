#!/usr/bin/env bash
# Checks that the `python` on PATH may take `pip install`, before scripts/test.sh
# installs the package into it: a virtual environment, or an interpreter of its own
# (pyenv, a container's). Debian 12 and Ubuntu 23.04+ mark their system Python as
# externally managed (PEP 668) and pip refuses to install into it, so there the tests
# run in a venv (README "Try it"). Exit 0 when fine; 1 with what to do otherwise.
set -euo pipefail

advice='Make a virtual environment first, then run the command again inside it:
    python3 -m venv .venv && . .venv/bin/activate
(On Debian and Ubuntu, python3 -m venv needs the python3-venv package.)'

if ! command -v python >/dev/null 2>&1; then
    printf 'error: there is no `python` on PATH (only python3?).\n%s\n' "$advice" >&2
    exit 1
fi
status=0
python - <<'PY' || status=$?
import sys
import sysconfig
from pathlib import Path

if sys.version_info < (3, 11):
    sys.exit(4)
in_venv = sys.prefix != sys.base_prefix
managed = (Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").is_file()
sys.exit(3 if managed and not in_venv else 0)
PY
case "$status" in
0) ;;
3)
    printf 'error: %s is the system Python, which refuses pip install (externally-managed-environment, PEP 668).\n%s\n' \
        "$(command -v python)" "$advice" >&2
    exit 1
    ;;
4)
    printf 'error: %s is Python %s; the export center needs 3.11 or newer.\n' \
        "$(command -v python)" "$(python -c 'import platform; print(platform.python_version())')" >&2
    exit 1
    ;;
*)
    printf 'error: %s does not run.\n%s\n' "$(command -v python)" "$advice" >&2
    exit 1
    ;;
esac
