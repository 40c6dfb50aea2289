"""``export-center doctor`` in a subprocess: it passes on a healthy setup and fails, with
a sentence that names the fix, when the database is down, the migrations are behind,
the broker is down or lacks the topic, the storage cannot be written, the registry is
invalid, a provider host does not answer, or the clock is off."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from alembic import command

from export_center.embedded import free_port
from export_center.runtime import alembic_config
from tests.integration.test_crash_recovery import FAKETIME_LIB
from tests.integration.test_rocketmq_broker import rocketmq_endpoint
from tests.support import smtp_server
from tests.support.fault_provider import registry_file
from tests.support.operator_seed import cli_env, run_cli


def doctor(env: dict[str, str]) -> tuple[int, dict[str, dict], str]:
    """Run ``doctor --json``; returns the exit code, the checks by name, and the table."""
    as_json = run_cli(["doctor", "--json"], env)
    checks = {c["name"]: c for c in json.loads(as_json.stdout)}
    table = run_cli(["doctor"], env)
    assert table.returncode == as_json.returncode, (table.stdout, table.stderr)
    return as_json.returncode, checks, table.stdout + table.stderr


def failed(checks: dict[str, dict]) -> dict[str, str]:
    return {name: c["message"] for name, c in checks.items() if not c["ok"]}


def test_a_healthy_setup_passes(seeded):
    code, checks, table = doctor(seeded.env)
    assert code == 0 and failed(checks) == {}, checks
    assert list(checks)[:5] == ["settings", "database", "migrations", "guard row", "clock"]
    assert checks["migrations"]["message"].startswith("at head (")
    assert checks["broker"]["message"] == "in-process transport (no broker)"
    assert "writable" in checks["storage"]["message"]
    assert "FLAKY" in checks["registry"]["message"]
    provider = [c for name, c in checks.items() if name.startswith("provider ")]
    assert len(provider) == 1 and "answers (FLAKY)" in provider[0]["message"]
    assert table.count("ok   ") == len(checks) and "FAIL" not in table


@pytest.mark.rocketmq
def test_a_healthy_setup_with_the_broker_passes(seeded):
    env = {
        **seeded.env,
        "EXPORT_CENTER_TRANSPORT": "rocketmq",
        "EXPORT_CENTER_TOPIC_PREFIX": "test-",
        "EXPORT_CENTER_ROCKETMQ__ENDPOINT": rocketmq_endpoint(),
    }
    code, checks, _ = doctor(env)
    assert code == 0 and failed(checks) == {}, checks
    assert checks["broker"]["message"].endswith("topic test-export-center-command-v1")


def test_the_database_down(seeded):
    env = {**seeded.env, "EXPORT_CENTER_DATABASE_URL": "mysql+pymysql://u:secret@127.0.0.1:1/x"}
    code, checks, table = doctor(env)
    assert code == 1
    assert failed(checks)["database"].endswith("start it or fix EXPORT_CENTER_DATABASE_URL")
    assert "secret" not in table  # the password is never printed
    for name in ("migrations", "guard row", "clock"):
        assert failed(checks)[name] == "not checked: the database does not answer"
    assert checks["storage"]["ok"] and checks["registry"]["ok"]  # the rest is still checked
    assert "4 checks failed: database, migrations, guard row, clock" in table


def test_a_database_never_upgraded_fails_without_a_traceback(db_url, tmp_path):
    if db_url.startswith("sqlite"):  # an empty file (doctor never creates one)
        Path(db_url.removeprefix("sqlite:///")).touch()
    code, checks, table = doctor(_env(tmp_path, db_url))  # an empty database
    assert code == 1
    assert failed(checks)["migrations"].startswith("the database is at revision none")
    assert failed(checks)["guard row"].startswith("cannot read it (")
    assert failed(checks)["guard row"].endswith("run `export-center db upgrade`")
    assert checks["storage"]["ok"] and checks["registry"]["ok"]  # the rest is still checked
    assert "Traceback" not in table


def test_migrations_behind(db_url, tmp_path):
    command.upgrade(alembic_config(db_url), "0004")
    env = _env(tmp_path, db_url)
    code, checks, _ = doctor(env)
    assert code == 1
    message = failed(checks)["migrations"]
    assert message.startswith("the database is at revision 0004, the code needs ")
    assert message.endswith("run `export-center db upgrade`")
    assert run_cli(["db", "upgrade"], env).returncode == 0
    code, checks, _ = doctor(env)
    assert code == 0, failed(checks)


@pytest.mark.rocketmq
def test_the_broker_down_or_without_the_topic(seeded):
    env = {
        **seeded.env,
        "EXPORT_CENTER_TRANSPORT": "rocketmq",
        "EXPORT_CENTER_ROCKETMQ__ENDPOINT": f"127.0.0.1:{free_port()}",
    }
    code, checks, _ = doctor(env)
    assert code == 1 and list(failed(checks)) == ["broker"]
    assert failed(checks)["broker"].endswith(
        "start the broker or fix EXPORT_CENTER_ROCKETMQ__ENDPOINT"
    )
    env.update(
        EXPORT_CENTER_ROCKETMQ__ENDPOINT=rocketmq_endpoint(),
        EXPORT_CENTER_TOPIC_PREFIX="no-such-prefix-",
    )
    code, checks, _ = doctor(env)
    assert code == 1 and list(failed(checks)) == ["broker"]
    message = failed(checks)["broker"]
    assert "does not know topic no-such-prefix-export-center-command-v1" in message
    assert message.endswith("create it (deploy/rocketmq) or fix EXPORT_CENTER_TOPIC_PREFIX")


def test_storage_that_cannot_be_written(seeded, tmp_path):
    data = tmp_path / "read-only-data"
    data.mkdir()
    # sysfs refuses new files to everyone, root included: a read-only file system as
    # far as the export center can tell.
    (data / "files").symlink_to("/sys/kernel")
    env = {**seeded.env, "EXPORT_CENTER_DATA_DIR": str(data)}
    code, checks, _ = doctor(env)
    assert code == 1 and list(failed(checks)) == ["storage"]
    message = failed(checks)["storage"]
    assert message.startswith(f"cannot write under {data / 'files'} (")
    assert message.endswith("make it writable or set EXPORT_CENTER_DATA_DIR")


def test_an_invalid_registry(seeded, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("ORDERS:\n  title: Orders\n  max_rows: many\n")
    code, checks, _ = doctor({**seeded.env, "EXPORT_CENTER_EXPORT_TYPES_FILE": str(broken)})
    assert code == 1 and list(failed(checks)) == ["registry"]
    assert str(broken) in failed(checks)["registry"]
    assert failed(checks)["registry"].endswith("fix the file and run the check again")
    assert not any(name.startswith("provider") for name in checks)


@pytest.mark.parametrize(
    ("environment", "samples", "named"),
    [("embedded", "false", None), ("production", None, None), ("embedded", None, "missing")],
)
def test_no_registry_doctor_and_serve_give_the_same_advice(environment, samples, named, tmp_path):
    """With no registry to read (the sample providers off and no file, or a file that
    does not exist), ``doctor`` and ``serve``'s start-up check say the same sentence,
    which names EXPORT_CENTER_EXPORT_TYPES_FILE (not the shipped sample file)."""
    database_url = f"sqlite:///{tmp_path / 'export-center.db'}"
    command.upgrade(alembic_config(database_url), "head")
    env = _env(tmp_path, database_url)
    env["EXPORT_CENTER_ENVIRONMENT"] = environment
    env.pop("EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS")
    if samples is not None:
        env["EXPORT_CENTER_MOUNT_SAMPLE_PROVIDERS"] = samples
    if environment == "production":
        secret = "p" * 40
        env.update(
            EXPORT_CENTER_API__JWT_SECRET=secret,
            EXPORT_CENTER_API__DOWNLOAD_SECRET=secret,
            EXPORT_CENTER_API__MANIFEST_SECRET=secret,
            EXPORT_CENTER_PROVIDER__INTERNAL_TOKEN=secret,
            EXPORT_CENTER_TOPIC_PREFIX="prod-",
        )
    if named is None:
        advice = (
            "no export-type registry: the sample providers are off, so set "
            "EXPORT_CENTER_EXPORT_TYPES_FILE to your registry file (export-center registry "
            "check FILE validates it)"
        )
    else:
        path = tmp_path / "no-such-types.yaml"
        env["EXPORT_CENTER_EXPORT_TYPES_FILE"] = str(path)
        advice = (
            f"no export-type registry: EXPORT_CENTER_EXPORT_TYPES_FILE names {path}, which "
            "does not exist; set it to your registry file (export-center registry check "
            "FILE validates it)"
        )
    code, checks, table = doctor(env)
    assert code == 1 and failed(checks) == {"registry": advice}, checks
    assert "Traceback" not in table
    serve = run_cli(["serve"], env)
    assert serve.returncode == 2, serve.stderr
    assert " ".join(serve.stderr.split()).endswith(f"cannot start: {advice}")
    assert not any(name.startswith("provider") for name in checks)


def test_a_provider_host_that_does_not_answer(seeded, tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    registry = registry_file(tmp_path, closed)
    code, checks, _ = doctor({**seeded.env, "EXPORT_CENTER_EXPORT_TYPES_FILE": str(registry)})
    assert code == 1
    (name,) = failed(checks)
    assert name == f"provider 127.0.0.1:{closed.rsplit(':', 1)[1]}"
    assert failed(checks)[name] == (
        f"{closed} does not answer (ConnectError) for FLAKY; "
        "start the service or fix provider_url in the registry"
    )


@pytest.mark.mariadb
def test_a_clock_off_by_a_minute(mariadb_db_url, tmp_path):
    """MariaDB only: SQLite reads the clock of the calling process, so a skewed process
    skews its database too and there is nothing to compare."""
    if not FAKETIME_LIB.exists():
        if os.environ.get("CI"):
            pytest.fail("libfaketime is required in CI (scripts/test.sh installs faketime)")
        pytest.skip("libfaketime is not installed")
    env = _env(tmp_path, mariadb_db_url)
    assert run_cli(["db", "upgrade"], env).returncode == 0
    skewed = {
        **env,
        "LD_PRELOAD": str(FAKETIME_LIB),
        "FAKETIME": "+60s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    code, checks, _ = doctor(skewed)
    assert code == 1 and list(failed(checks)) == ["clock"]
    message = failed(checks)["clock"]
    assert message.startswith("this host's clock is +6") and "sync it with NTP" in message


def _env(tmp_path: Path, database_url: str) -> dict[str, str]:
    """A fresh installation's environment on ``database_url`` (sample registry)."""

    class _Settings:
        data_dir = tmp_path / "data"
        resolved_database_url = database_url
        export_types_file = None

    # No `serve` of this installation runs: its port is one nothing listens on.
    return cli_env(_Settings(), EXPORT_CENTER_API__PORT=str(free_port()))


@pytest.mark.s3
def test_s3_storage_healthy_missing_bucket_not_writable_and_down(
    seeded, s3_endpoint, bucket, private_s3
):
    from tests.support.s3 import SECRET_KEY, storage_env

    code, checks, table = doctor({**seeded.env, **storage_env(s3_endpoint, bucket)})
    assert code == 0 and failed(checks) == {}, checks
    assert checks["storage"]["message"] == (
        f"bucket {bucket} at {s3_endpoint} writable (object and multipart upload)"
    )
    assert SECRET_KEY not in table

    env = {**seeded.env, **storage_env(s3_endpoint, "no-such-bucket-here")}
    code, checks, table = doctor(env)
    assert code == 1 and list(failed(checks)) == ["storage"]
    assert failed(checks)["storage"] == (
        f"bucket no-such-bucket-here at {s3_endpoint} does not exist; create it (for the test "
        "server: `bash scripts/s3proxy.sh bucket no-such-bucket-here`) or fix "
        "EXPORT_CENTER_STORAGE__S3__BUCKET"
    )
    assert SECRET_KEY not in table

    read_only = private_s3(read_only=True)
    read_only.make_bucket("frozen")
    code, checks, _ = doctor({**seeded.env, **storage_env(read_only.url, "frozen")})
    assert code == 1 and list(failed(checks)) == ["storage"]
    message = failed(checks)["storage"]
    assert message.startswith(f"bucket frozen at {read_only.url} is not writable (")
    assert message.endswith("on it for these credentials")

    closed = f"http://127.0.0.1:{free_port()}"
    code, checks, _ = doctor({**seeded.env, **storage_env(closed, bucket, max_attempts="1")})
    assert code == 1 and list(failed(checks)) == ["storage"]
    assert failed(checks)["storage"] == (
        f"bucket {bucket} at {closed} does not answer (EndpointConnectionError: the object "
        "storage does not answer); start it or fix EXPORT_CENTER_STORAGE__S3__ENDPOINT_URL"
    )

    env = {**seeded.env, **storage_env(s3_endpoint, bucket), "AWS_SECRET_ACCESS_KEY": ""}
    code, checks, _ = doctor(env)  # a key without its secret
    assert code == 1 and list(failed(checks)) == ["storage"]
    assert failed(checks)["storage"] == (
        "incomplete S3 credentials (PartialCredentialsError): set both AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, or neither to use the AWS chain's other sources"
    )


@pytest.mark.parametrize(
    ("name", "value", "sentence"),
    [
        ("EXPORT_CENTER_STORAGE__S3__PART_SIZE_MB", "1", "greater than or equal to 5"),
        ("EXPORT_CENTER_STORAGE__BACKEND", "S3-9f3k", "Input should be 'local' or 's3'"),
        ("EXPORT_CENTER_STORAGE__S3__DOWNLOAD", "stream-9f3k", "'redirect' or 'proxy'"),
    ],
)
def test_an_invalid_setting_is_named_in_one_line_never_with_its_value(
    seeded, name, value, sentence
):
    result = run_cli(["doctor"], {**seeded.env, name: value})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("export-center: cannot start: invalid settings\n")
    assert f"  {name}: " in result.stderr and sentence in result.stderr
    assert "Traceback" not in result.stderr
    assert "9f3k" not in result.stderr  # a refused value may be a secret: never printed


@pytest.mark.second_process  # long: runs beside the rest (scripts/test.sh)
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_smtp_and_robots_are_checked_without_sending_anything(seeded):
    mailbox = smtp_server.Mailbox()
    controller = smtp_server.start(
        mailbox,
        authenticator=smtp_server.Credentials(mailbox, "robot", "s3cret"),
        auth_required=True,
        auth_require_tls=False,
    )
    listening = socket.create_server(("127.0.0.1", 0))
    up = f"http://127.0.0.1:{listening.getsockname()[1]}/open-apis/bot/v2/hook/x"
    down = f"http://127.0.0.1:{free_port()}/robot/send"
    robots = {"ops": {"kind": "feishu", "url": up}, "sales": {"kind": "dingtalk", "url": down}}
    base = {
        **seeded.env,
        "EXPORT_CENTER_NOTIFY__SMTP_HOST": "127.0.0.1",
        "EXPORT_CENTER_NOTIFY__SMTP_PORT": str(controller.port),
        "EXPORT_CENTER_NOTIFY__SMTP_TLS": "none",
        "EXPORT_CENTER_NOTIFY__ROBOTS": json.dumps(robots),
    }
    login = {
        "EXPORT_CENTER_NOTIFY__SMTP_USERNAME": "robot",
        "EXPORT_CENTER_NOTIFY__SMTP_PASSWORD": "s3cret",
    }
    try:
        _, good, _ = doctor({**base, **login})
        _, wrong, _ = doctor({**base, **login, "EXPORT_CENTER_NOTIFY__SMTP_PASSWORD": "wrong"})
        _, anonymous, _ = doctor(base)
    finally:
        controller.stop()
        listening.close()
    _, stopped, table = doctor({**base, **login})
    assert good["smtp"]["ok"], good["smtp"]
    assert (
        good["smtp"]["message"]
        == f"127.0.0.1:{controller.port} (none, login robot) takes a session"
    )
    assert mailbox.mails == []  # a check never sends mail
    assert good["robot ops"]["ok"] and "nothing posted" in good["robot ops"]["message"]
    assert failed(good) == {"robot sales": failed(good)["robot sales"]}
    assert failed(good)["robot sales"].endswith(
        "check the robot's url in EXPORT_CENTER_NOTIFY__ROBOTS and the network path to it"
    )
    assert failed(wrong)["smtp"].startswith(f"127.0.0.1:{controller.port} refused the login (535)")
    assert "wrong" not in failed(wrong)["smtp"]
    assert failed(anonymous)["smtp"].startswith(
        f"127.0.0.1:{controller.port} refused the sender export-center@localhost (530"
    )
    assert "EXPORT_CENTER_NOTIFY__SMTP_USERNAME" in failed(anonymous)["smtp"]
    assert failed(stopped)["smtp"].startswith(
        f"the SMTP server at 127.0.0.1:{controller.port} does not answer"
    )
    assert "s3cret" not in table


def test_no_notification_channel_configured_adds_no_check(seeded):
    _, checks, _ = doctor(seeded.env)
    assert "smtp" not in checks and not any(name.startswith("robot ") for name in checks)
