"""Every command of the runbook (docs/operations.md) runs, in the order written, against
a seeded database (a succeeded, a failed, a quarantined and a stuck export), and every
alert of deploy/prometheus/alerts.yml has its section with at least three commands."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml

from tests.support.operator_seed import ROOT

RUNBOOK = ROOT / "docs" / "operations.md"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"


def sections() -> dict[str, list[str]]:
    """The commands (``$ ...`` lines of console blocks) of each ``###`` section."""
    found: dict[str, list[str]] = {}
    current = None
    in_block = False
    for line in RUNBOOK.read_text().splitlines():
        if line.startswith("### "):
            current = line[4:].strip()
            found[current] = []
        elif line.startswith("```"):
            in_block = line.strip() == "```console"
        elif in_block and line.startswith("$ "):
            assert current is not None, line
            found[current].append(line[2:])
    return found


def alert_names() -> list[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


def test_every_alert_has_a_section_with_what_to_run_and_decide():
    text = RUNBOOK.read_text()
    found = sections()
    for name in alert_names():
        assert name in found, f"docs/operations.md has no section ### {name}"
        assert len(found[name]) >= 3, (name, found[name])
        body = text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        for part in ("**What it means.**", "**First commands.**", "**How to decide.**"):
            assert part in body, (name, part)
        assert "**How to recover.**" in body, name
        assert f"[{name}](#{name.lower()})" in text  # the table links it


@pytest.mark.second_process  # long: runs beside the rest (scripts/test.sh)
def test_every_documented_command_runs_against_a_seeded_database(seeded):
    values = seeded.placeholders()
    ran = 0
    for section, commands in sections().items():
        for command in commands:
            filled = command
            for placeholder, value in values.items():
                filled = filled.replace(placeholder, value)
            assert not re.search(r"<[a-z-]+>", filled), (section, command)
            args = shlex.split(filled)
            assert args[0] == "export-center", (section, command)
            result = seeded.cli(*args[1:])
            assert result.returncode == 0, (section, filled, result.stdout, result.stderr)
            assert result.stdout.strip(), (section, filled)
            ran += 1
    assert ran >= 3 * len(alert_names())
    # The actions of the runbook took effect, and each is in the audit trail.
    shown = seeded.cli("tasks", "show", seeded.quarantined, "--json")
    assert '"manual_retry"' in shown.stdout and '"dead_letter"' in shown.stdout
    assert '"manual_cancel"' in seeded.cli("tasks", "show", seeded.stuck, "--json").stdout
