"""The operator CLI prints every value as text and says where it reads (SQLite and
MariaDB, in a subprocess).

Values written by users and providers (task names, user ids, provider error messages,
audit reasons) hold what they like: rich markup (``[bold]``, ``[/]``, ``[link=...]``),
emoji codes, escape sequences, carriage returns, bidi overrides, Chinese and emoji.
Every command prints them as they are (control characters made visible) and never
crashes. Every operator command names its data directory, database and registry on
its first lines, and never creates a database, a data directory or a secret.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import update

from export_center import repository
from export_center.models import ExportOutbox, ExportTask
from tests.support.operator_seed import cli_env, last_line, run_cli

T = ExportTask.__table__
O = ExportOutbox.__table__  # noqa: E741

#: Where each hostile value goes, and the value: rich would read the first four as
#: markup (a closing tag with nothing to close is a MarkupError), an emoji code or a
#: hyperlink; the last two are printable text that must print unchanged.
FAILED_NAME = "[bold]b[/]"
FAILURE = "fetch: x [/] y [link=https://evil.example]go[/link]"
STUCK_NAME = ":smile: [red]"
STUCK_USER = "九月订单 📦 [/]"
DEAD_ERROR = "[/] dead 👩\u200d💻"
DEAD_NAME = "九月订单 👩\u200d💻"
#: Control characters, and what the terminal is shown instead.
CONTROL_NAME, CONTROL_NAME_SHOWN = "red\x1b[31mX over\rwrite", "red\\x1b[31mX over\\rwrite"
CONTROL_FAILURE = "tab\there bell\x07 rtl\u202eevil"
CONTROL_FAILURE_SHOWN = "tab\\there bell\\x07 rtl\\u202eevil"
#: Wide enough that no cell folds: each value is on one line of the table.
WIDE = {"COLUMNS": "1000"}


def _set(seeded, task_no: str, **values) -> None:
    with seeded.stack.runtime.engine.begin() as conn:
        task = repository.read_task_by_no(conn, task_no)
        assert task is not None
        conn.execute(update(T).where(T.c.id == task.id).values(**values))


def _cli(seeded, *args: str):
    return run_cli(list(args), {**seeded.env, **WIDE})


def _ok(result) -> str:
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "MarkupError" not in result.stderr
    return result.stdout


def test_markup_emoji_and_chinese_print_exactly_in_every_table(seeded):
    _set(seeded, seeded.failed, task_name=FAILED_NAME, failure_message=FAILURE)
    _set(seeded, seeded.stuck, task_name=STUCK_NAME, requested_by=STUCK_USER)
    _set(seeded, seeded.quarantined, task_name=DEAD_NAME)
    with seeded.stack.runtime.engine.begin() as conn:
        conn.execute(
            update(O).where(O.c.event_id == seeded.quarantined_event).values(last_error=DEAD_ERROR)
        )
    listed = _ok(_cli(seeded, "tasks", "list"))
    for value in (FAILED_NAME, FAILURE, STUCK_NAME, STUCK_USER, DEAD_NAME):
        assert value in listed, value
    shown = _ok(_cli(seeded, "tasks", "show", seeded.failed))
    assert FAILED_NAME in shown and f"PROVIDER_UNAVAILABLE: {FAILURE}" in shown
    for args in (["outbox", "list"], ["outbox", "list", "--stuck"]):
        out = _ok(_cli(seeded, *args))
        assert STUCK_NAME in out and seeded.stuck in out, args
    dead = _ok(_cli(seeded, "dlq", "list"))
    assert DEAD_ERROR in dead and DEAD_NAME in dead
    assert DEAD_ERROR in _ok(_cli(seeded, "dlq", "show", seeded.quarantined_event))
    # The JSON keeps each value exactly, and the name filter takes it as plain text.
    (task,) = json.loads(_ok(_cli(seeded, "tasks", "list", "--name", FAILED_NAME, "--json")))
    assert (task["taskId"], task["taskName"], task["error"]) == (
        seeded.failed,
        FAILED_NAME,
        FAILURE,
    )
    (task,) = json.loads(_ok(_cli(seeded, "tasks", "list", "--user", STUCK_USER, "--json")))
    assert (task["owner"], task["taskName"]) == (STUCK_USER, STUCK_NAME)


def test_control_characters_are_shown_never_obeyed(seeded):
    _set(seeded, seeded.failed, task_name=CONTROL_NAME, failure_message=CONTROL_FAILURE)
    for args in (["tasks", "list"], ["tasks", "show", seeded.failed]):
        out = _ok(_cli(seeded, *args))
        assert CONTROL_NAME_SHOWN in out and CONTROL_FAILURE_SHOWN in out, (args, out)
        assert not {"\x1b", "\r", "\x07", "\u202e", "\t"} & set(out), args
    tasks = json.loads(_ok(_cli(seeded, "tasks", "list", "--json")))
    shown = {t["taskName"]: t["error"] for t in tasks}
    assert shown[CONTROL_NAME] == CONTROL_FAILURE  # JSON escapes them itself


def test_the_audit_trail_prints_a_reason_with_markup(seeded):
    """An operator's own reason is a value like any other (audit rows of tasks show)."""
    reason = "fixed [/] by [bold]ops[/] 🚀"
    retried = seeded.cli("tasks", "retry", seeded.failed, "--reason", reason)
    assert retried.returncode == 0, retried.stderr
    assert "(September for bob)" in retried.stdout
    shown = _ok(seeded.cli("tasks", "show", seeded.failed))
    assert reason in shown
    report = json.loads(_ok(seeded.cli("tasks", "show", seeded.failed, "--json")))
    assert [a["reason"] for a in report["audit"]] == [reason]
    assert report["audit"][0]["taskName"] == "September for bob"
    assert {c["taskName"] for c in report["commands"]} == {"September for bob"}


def test_errors_and_doctor_print_values_as_text(seeded, tmp_path):
    missing = seeded.cli("tasks", "show", "exp_[/]\x1b[31m")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert last_line(missing).startswith("TASK_NOT_FOUND: no export task exp_[/]\\x1b[31m")
    (tmp_path / "types [").mkdir()
    broken = tmp_path / "types [" / "bold].yaml"  # the path holds "[/bold]"
    broken.write_text("ORDERS:\n  title: Orders\n  max_rows: many\n")
    env = {**seeded.env, **WIDE, "EXPORT_CENTER_EXPORT_TYPES_FILE": str(broken)}
    doctor = run_cli(["doctor"], env)
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr
    assert "types [/bold].yaml" in doctor.stdout


def test_task_names_are_in_every_listing_and_the_name_filter(seeded):
    tasks = json.loads(_ok(seeded.cli("tasks", "list", "--json")))
    assert {t["taskId"]: t["taskName"] for t in tasks} == {
        seeded.succeeded: "September orders",
        seeded.failed: "September for bob",
        seeded.quarantined: "Carol 九月",
        seeded.stuck: "Dave waits",
    }
    by_name = json.loads(_ok(seeded.cli("tasks", "list", "--name", "septem", "--json")))
    assert {t["taskId"] for t in by_name} == {seeded.succeeded, seeded.failed}
    assert [
        t["taskId"]
        for t in json.loads(_ok(seeded.cli("tasks", "list", "--name", "九月", "--json")))
    ] == [seeded.quarantined]
    # % and _ are plain characters, not patterns.
    assert json.loads(_ok(seeded.cli("tasks", "list", "--name", "%", "--json"))) == []
    assert json.loads(_ok(seeded.cli("tasks", "list", "--name", "_", "--json"))) == []
    shown = _ok(seeded.cli("tasks", "show", seeded.quarantined))
    assert "Carol 九月" in shown
    (letter,) = json.loads(_ok(seeded.cli("dlq", "list", "--json")))
    assert letter["command"]["taskName"] == "Carol 九月"
    assert "Carol 九月" in _ok(seeded.cli("dlq", "list"))
    (stuck,) = json.loads(_ok(seeded.cli("outbox", "list", "--json")))
    assert stuck["taskName"] == "Dave waits"


def _announced(result, what: str, data_dir: Path) -> list[str]:
    lines = result.stderr.splitlines()
    assert lines[0] == f"export-center {what}:", result.stderr
    assert lines[1] == f"  data directory  {data_dir.resolve()} (from EXPORT_CENTER_DATA_DIR)"
    assert lines[2].startswith("  database        ")
    assert lines[3].startswith("  registry        ")
    return lines


ANNOUNCED = [
    ["tasks", "list"],
    ["tasks", "list", "--json"],
    ["tasks", "show", "exp_none"],
    ["tasks", "retry", "exp_none", "--reason", "why not"],
    ["tasks", "cancel", "exp_none", "--reason", "why not"],
    ["outbox", "list", "--stuck"],
    ["dlq", "list"],
    ["dlq", "show", "none"],
    ["doctor"],
    ["doctor", "--json"],
]


@pytest.mark.second_process  # long: runs beside the rest (scripts/test.sh)
def test_every_operator_command_says_first_where_it_reads(seeded):
    url = seeded.stack.settings.resolved_database_url
    for args in ANNOUNCED:
        result = seeded.cli(*args)
        what = " ".join(a for a in args[:2] if not a.startswith(("-", "exp_", "none")))
        lines = _announced(result, what, seeded.stack.settings.data_dir)
        assert url in lines[2] or ("***@" in lines[2] and url.split("@")[-1] in lines[2])
        if "--json" in args:
            json.loads(result.stdout)  # stdout stays JSON: the lines above are on stderr


@pytest.mark.parametrize(
    "args",
    [["tasks", "list"], ["tasks", "show", "exp_x"], ["outbox", "list"], ["dlq", "list"]],
    ids=" ".join,
)
@pytest.mark.parametrize("place", ["missing", "empty"])
def test_a_wrong_data_directory_is_named_and_nothing_is_created(tmp_path, args, place):
    data = tmp_path / "not-the-service"
    if place == "empty":
        data.mkdir()
    env = _fresh_env(data)
    result = run_cli(args, env)
    assert result.returncode == 1, (result.stdout, result.stderr)
    _announced(result, " ".join(args[:2]), data)
    line = last_line(result)
    assert line.startswith(f"cannot open the database: no database at {data}/export-center.db (")
    reason = "does not exist" if place == "missing" else "holds no export-center database"
    assert f"the data directory {data} {reason}" in line
    assert "EXPORT_CENTER_DATA_DIR" in line and "Traceback" not in result.stderr
    assert result.stdout == ""
    assert (sorted(data.iterdir()) if data.exists() else None) == ([] if place == "empty" else None)


@pytest.mark.parametrize("place", ["missing", "empty"])
def test_doctor_on_a_wrong_data_directory_creates_nothing(tmp_path, place):
    data = tmp_path / "not-the-service"
    if place == "empty":
        data.mkdir()
    env = _fresh_env(data)
    result = run_cli(["doctor", "--json"], env)
    assert result.returncode == 1, result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["database"]["ok"] is False
    assert checks["database"]["message"].startswith(f"no database at {data}/export-center.db")
    assert checks["migrations"]["message"] == "not checked: no database"
    assert checks["settings"]["ok"]  # embedded default: the secrets come with `serve`
    assert (
        "no jwt-secret, download-secret, manifest-secret, internal-token in"
        in checks["settings"]["message"]
    )
    assert checks["storage"]["ok"] and "does not exist yet" in checks["storage"]["message"]
    assert (sorted(data.iterdir()) if data.exists() else None) == ([] if place == "empty" else None)


def _fresh_env(data: Path) -> dict[str, str]:
    class _Settings:
        data_dir = data
        resolved_database_url = f"sqlite:///{data / 'export-center.db'}"
        export_types_file = None

    env = cli_env(_Settings())
    env.pop("EXPORT_CENTER_DATABASE_URL")  # the default: the data directory's database
    return env


def test_a_data_directory_with_markup_in_its_path_is_text_everywhere(tmp_path):
    (tmp_path / "ops [").mkdir()
    data = tmp_path / "ops [" / "bold]"  # the path holds "[/bold]"
    env = _fresh_env(data)
    upgraded = run_cli(["db", "upgrade"], env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert upgraded.stdout.startswith("database at head: sqlite:///")
    listed = run_cli(["tasks", "list"], env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "tasks (0): (none)"
    _announced(listed, "tasks list", data)
    doctor = run_cli(["doctor"], {**env, **WIDE})
    assert "Traceback" not in doctor.stderr and f"{data}" in doctor.stderr
    assert "ok   migrations" in doctor.stdout
