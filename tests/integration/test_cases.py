"""../shared/cases/CASES.md through the whole pipeline: provider over HTTP -> client
checks -> writer -> stored file, read back with Python's csv module and openpyxl.

The writer-level tests of the same cases are in tests/unit/test_*_writer.py; these show
the export center end to end (task state, stored file, download).
"""

from __future__ import annotations

import datetime as dt

import openpyxl
import orjson
import pytest

from tests.support.cases_pipeline import PERMS, page, run, sheet_xml, xlsx_cells
from tests.support.helpers import create, download, read_csv, wait_state
from tests.unit.writer_helpers import FORMULA_LIKE

STR3 = [("id", "INTEGER"), ("name", "STRING"), ("city", "STRING")]


def test_e01_bom_once_over_three_pages(case_stack, cases):
    cases.pages = [
        page([{"id": 1, "name": "张三", "city": "北京"}], columns=STR3, more=True, cursor="1"),
        page([{"id": 2, "name": "李四", "city": "上海"}], more=True, cursor="2"),
        page([{"id": 3, "name": "王五", "city": "深圳"}]),
    ]
    detail, data = run(case_stack, "csv")
    assert detail["state"] == "succeeded"
    assert data[:3] == b"\xef\xbb\xbf" and data.count(b"\xef\xbb\xbf") == 1
    assert data[3:].decode() == "id,name,city\r\n1,张三,北京\r\n2,李四,上海\r\n3,王五,深圳\r\n"


def test_e02_quoting(case_stack, cases):
    cols = [("id", "INTEGER"), ("name", "STRING"), ("note", "STRING"), ("addr", "STRING")]
    cases.pages = [
        page(
            [{"id": 2, "name": 'O"Brien, Jr.', "note": "line1\nline2", "addr": "a\rb"}],
            columns=cols,
        )
    ]
    detail, data = run(case_stack, "csv")
    assert data[3:] == b'id,name,note,addr\r\n2,"O""Brien, Jr.","line1\nline2","a\rb"\r\n'
    records = read_csv(data)
    assert len(records) == 2 and records[1] == ["2", 'O"Brien, Jr.', "line1\nline2", "a\rb"]


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_e03_leading_zeros(case_stack, cases, fmt):
    cols = [("order_no", "STRING"), ("phone", "STRING"), ("qty", "INTEGER")]
    cases.pages = [page([{"order_no": "000123", "phone": "0730907665", "qty": 7}], columns=cols)]
    detail, data = run(case_stack, fmt)
    if fmt == "csv":
        assert data.endswith(b"\r\n000123,0730907665,7\r\n")
    else:
        ws = xlsx_cells(data)
        assert (ws["A2"].value, ws["A2"].data_type) == ("000123", "s")
        assert (ws["B2"].value, ws["B2"].data_type) == ("0730907665", "s")
        assert (ws["C2"].value, ws["C2"].data_type) == (7, "n")


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_e04_integers_beyond_15_digits(case_stack, cases, fmt):
    cols = [("order_id", "INTEGER"), ("big", "INTEGER"), ("n", "INTEGER")]
    raw = '[{"order_id":9912140633506421,"big":568883383628111872,"n":999999999999999}]'
    cases.pages = [page([], columns=cols, raw_rows=raw)]
    detail, data = run(case_stack, fmt)
    assert detail["state"] == "succeeded", detail
    if fmt == "csv":
        assert data.endswith(b"\r\n9912140633506421,568883383628111872,999999999999999\r\n")
    else:
        ws = xlsx_cells(data)
        assert (ws["A2"].value, ws["A2"].data_type) == ("9912140633506421", "s")
        assert (ws["B2"].value, ws["B2"].data_type) == ("568883383628111872", "s")
        assert (ws["C2"].value, ws["C2"].data_type) == (999999999999999, "n")


E06_INPUTS = FORMULA_LIKE


def test_e06_formula_injection_csv(case_stack, cases):
    cols = [("remark", "STRING"), ("amount", "DECIMAL"), ("remark2", "STRING")]
    rows = [{"remark": r, "amount": "-5.00", "remark2": "plain"} for r in E06_INPUTS]
    cases.pages = [page(rows, columns=cols)]
    detail, data = run(case_stack, "csv")
    records = read_csv(data)[1:]
    assert [r[0] for r in records[:11]] == ["'" + r for r in E06_INPUTS[:11]]
    assert [r[0] for r in records[11:]] == E06_INPUTS[11:]
    assert all(r[1] == "-5.00" and r[2] == "plain" for r in records)
    dangerous = tuple("=+-@\t\r\n＝＋－＠")
    for record in records:
        for cell in record:
            assert not cell.startswith(dangerous) or cell == "-5.00"


def test_e07_no_formula_in_xlsx(case_stack, cases):
    values = [
        "=1+1",
        "=cmd|' /C calc'!A0",
        '=HYPERLINK("http://example.invalid/x","click")',
        "@SUM(1,1)",
    ]
    cases.pages = [page([{"t": v} for v in values], columns=[("t", "STRING")])]
    detail, data = run(case_stack, "xlsx")
    assert "<f>" not in sheet_xml(data) and "<f " not in sheet_xml(data)
    ws = xlsx_cells(data)
    assert [
        (ws.cell(row=i, column=1).value, ws.cell(row=i, column=1).data_type) for i in range(2, 6)
    ] == [(v, "s") for v in values]


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_e08_control_characters_do_not_fail_the_export(case_stack, cases, fmt):
    remarks = ["kr 400\u0016000", "bell\u0007°", "vt\u000bx", "nul\u0000x", "tab\tlf\ncr\r"]
    cases.pages = [
        page(
            [{"id": i + 1, "remark": r} for i, r in enumerate(remarks)],
            columns=[("id", "INTEGER"), ("remark", "STRING")],
        )
    ]
    detail, data = run(case_stack, fmt)
    assert detail["state"] == "succeeded", detail
    if fmt == "csv":
        assert [r[1] for r in read_csv(data)[1:]] == remarks  # kept verbatim in CSV (policy)
    else:
        ws = xlsx_cells(data)
        got = [ws.cell(row=i, column=2).value for i in range(2, 7)]
        assert got[:4] == ["kr 400\ufffd000", "bell\ufffd°", "vt\ufffdx", "nul\ufffdx"]
        assert got[4].startswith("tab\tlf\ncr")
        assert "4 control character(s) replaced" in detail["warning"]


def test_e10_cells_over_32767_are_cut_in_xlsx_and_noted(case_stack, cases):
    cols = [("id", "INTEGER"), ("body", "STRING")]
    cases.pages = [
        page([{"id": 1, "body": "x" * 40000}, {"id": 2, "body": "😀" * 20000}], columns=cols)
    ]
    detail, data = run(case_stack, "xlsx")
    ws = xlsx_cells(data)
    assert len(ws["B2"].value) == 32767
    assert len(ws["B3"].value.encode("utf-16-le")) // 2 <= 32767
    assert detail["warning"].startswith("2 cell(s) cut to Excel's 32,767-character limit")
    cases.pages = [page([{"id": 1, "body": "x" * 40000}], columns=cols)]
    detail, data = run(case_stack, "csv")
    assert read_csv(data)[1][1] == "x" * 40000 and detail["warning"] is None


def test_e13_tz_aware_datetimes_in_the_export_time_zone(case_stack, cases):
    values = ["2024-03-01T12:00:00+08:00", "2024-03-01T04:00:00Z", "2024-03-01T12:00:00"]
    cases.pages = [page([{"at": v} for v in values], columns=[("at", "DATETIME")])]
    detail, data = run(case_stack, "xlsx")
    ws = xlsx_cells(data)
    got = [ws.cell(row=i, column=1) for i in (2, 3, 4)]
    assert [c.value for c in got] == [
        dt.datetime(2024, 3, 1, 12),
        dt.datetime(2024, 3, 1, 12),
        dt.datetime(2024, 3, 1, 20),
    ]
    assert all(c.data_type == "d" or c.is_date for c in got) and "yyyy" in got[0].number_format
    detail, data = run(case_stack, "csv")
    assert [r[0] for r in read_csv(data)[1:]] == [
        "2024-03-01 12:00:00",
        "2024-03-01 12:00:00",
        "2024-03-01 20:00:00",
    ]


def test_each_export_takes_its_own_time_zone(case_stack, cases):
    # One deployment (default Asia/Shanghai), users in other zones: the zone is a create
    # field, kept on the task, and decides the wall times of that export's file only.
    values = ["2024-03-01T04:00:00Z", "2024-07-01T04:00:00Z"]
    cases.pages = [page([{"at": v} for v in values], columns=[("at", "DATETIME")])]
    client = case_stack.client(perms=PERMS)
    walls = {}
    for zone in (None, "America/New_York", "Europe/Berlin", "UTC"):
        body = {"exportType": "CASES", "parameters": {}, **({"timeZone": zone} if zone else {})}
        answer = create(client, "csv", **body)
        assert answer.status_code == 202, answer.text
        detail = wait_state(client, answer.json()["taskId"], timeout=60)
        assert detail["state"] == "succeeded" and detail["timeZone"] == (zone or "Asia/Shanghai")
        walls[zone] = [r[0] for r in read_csv(download(client, detail))[1:]]
        sent = [r for r in cases.requests if r.get("taskId") == detail["taskId"]]
        assert sent and {r["timeZone"] for r in sent} == {zone or "Asia/Shanghai"}
    assert walls == {
        None: ["2024-03-01 12:00:00", "2024-07-01 12:00:00"],
        "America/New_York": ["2024-02-29 23:00:00", "2024-07-01 00:00:00"],
        "Europe/Berlin": ["2024-03-01 05:00:00", "2024-07-01 06:00:00"],
        "UTC": ["2024-03-01 04:00:00", "2024-07-01 04:00:00"],
    }
    for bad in (
        "asia/shanghai",
        "+08:00",
        "Mars/Olympus",
        "../../etc/passwd",
        "",
        "UTC ",
        "localtime",
        "posixrules",
        "posix/Asia/Shanghai",
        "right/UTC",
        "Factory",
    ):
        refused = create(client, "csv", exportType="CASES", parameters={}, timeZone=bad)
        assert refused.status_code == 422, (bad, refused.text)
        assert (refused.json()["code"], refused.json()["field"]) == (
            "INVALID_TIME_ZONE",
            "timeZone",
        )
    first = create(
        client, "csv", exportType="CASES", parameters={}, requestId="tz-1", timeZone="UTC"
    )
    assert first.status_code == 202
    reused = create(
        client, "csv", exportType="CASES", parameters={}, requestId="tz-1", timeZone="Asia/Tokyo"
    )
    assert reused.status_code == 409 and "time zone" in reused.json()["message"]
    wait_state(client, first.json()["taskId"], timeout=60)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e400"])
def test_e15_nan_and_infinity_fail_naming_row_and_column(case_stack, cases, literal):
    cols = [("id", "INTEGER"), ("v", "DECIMAL")]
    cases.pages = [
        page([], columns=cols, raw_rows=f'[{{"id":1,"v":"1.5"}},{{"id":2,"v":{literal}}}]')
    ]
    detail, data = run(case_stack, "xlsx")
    assert detail["state"] == "failed", detail
    assert detail["error"]["code"] == "INVALID_VALUE"
    assert "row 2, column v" in detail["error"]["message"]
    assert list(case_stack.runtime.storage.list()) == []


def test_e17_keyset_ties_are_neither_skipped_nor_repeated(case_stack, cases):
    ts = "2024-01-01T10:00:00.000"
    cases.db.executemany(
        "INSERT INTO events VALUES (?, ?)",
        [(1, ts), (2, ts), (3, ts), (4, "2024-01-01T10:00:01.000"), (5, ts)],
    )
    detail, data = run(case_stack, "csv", export_type="EVENTS", pageSize=2)
    assert detail["state"] == "succeeded", detail
    assert [int(r[0]) for r in read_csv(data)[1:]] == [1, 2, 3, 5, 4]
    cursors = [r["cursor"] for r in cases.requests if r.get("cursor")]
    assert cursors[0].startswith("~")  # signed (created_at, id) pair
    import base64

    payload = cursors[0][1:].split(".")[0]
    assert orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["v"] == [
        ts,
        2,
    ]


def test_e19_rows_written_during_the_export(case_stack, cases):
    cases.db.executemany(
        "INSERT INTO events VALUES (?, ?)",
        [
            (1, "2024-01-01T10:00:00.000"),
            (2, "2024-01-01T10:00:01.000"),
            (3, "2024-01-01T10:00:02.000"),
            (4, "2024-01-01T10:00:03.000"),
        ],
    )

    def after(page_no: int) -> None:
        if page_no == 1:
            cases.db.execute("INSERT INTO events VALUES (5, '2024-01-01T12:00:01.000')")  # after T0
            cases.db.execute("INSERT INTO events VALUES (0, '2024-01-01T09:00:00.000')")  # behind
            cases.db.execute("DELETE FROM events WHERE id = 4")

    cases.after_page = after
    detail, data = run(
        case_stack, "csv", export_type="EVENTS", pageSize=2, snapshotUpper="2024-01-01T12:00:00.000"
    )
    ids = [int(r[0]) for r in read_csv(data)[1:]]
    assert ids == [1, 2, 3] and len(ids) == len(set(ids))


def test_e21_inclusive_days_in_a_time_zone(case_stack, cases):
    cases.db.executemany(
        "INSERT INTO events VALUES (?, ?)",
        [
            (1, "2024-01-29T15:59:59.999000"),
            (2, "2024-01-29T16:00:00.000000"),
            (3, "2024-01-31T15:30:00.000000"),
            (4, "2024-01-31T16:00:00.000000"),
        ],
    )
    detail, data = run(
        case_stack,
        "csv",
        export_type="EVENTS",
        tz="Asia/Shanghai",
        **{"from": "2024-01-30", "to": "2024-01-31"},
    )
    assert [int(r[0]) for r in read_csv(data)[1:]] == [2, 3]
    client = case_stack.client(perms=PERMS)
    refused = create(
        client, "csv", exportType="EVENTS", parameters={"from": "2024-01-31", "to": "2024-01-30"}
    )
    assert refused.status_code == 422 and refused.json()["code"] == "INVALID_DATE_RANGE"


@pytest.mark.parametrize(
    ("name", "ascii_name"),
    [("../../x", "_.._x.csv"), ("..\\..\\x", "_.._x.csv"), ("订单导出 9月", "_ 9_.csv")],
)
def test_e33_file_names_never_carry_paths(case_stack, cases, name, ascii_name):
    cases.pages = [page([{"id": 1}], columns=[("id", "INTEGER")])]
    client = case_stack.client(perms=PERMS)
    answer = create(client, "csv", exportType="CASES", taskName=name)
    detail = wait_state(client, answer.json()["taskId"])
    response = client.get(detail["downloadUrl"])
    header = response.headers["content-disposition"]
    plain = header.split('filename="')[1].split('"')[0]
    assert plain == ascii_name
    assert "/" not in plain and "\\" not in plain and plain.isascii()
    assert "filename*=UTF-8''" in header
    from urllib.parse import unquote

    extended = unquote(header.split("filename*=UTF-8''")[1])
    assert "/" not in extended and "\\" not in extended and extended.endswith(".csv")
    if not name.startswith("."):
        assert extended == "订单导出 9月.csv"
    key = [o.key for o in case_stack.runtime.storage.list()][0]
    assert key.startswith("exports/") and detail["taskId"] in key and ".." not in key


def test_a_long_cjk_task_name_saves_whole_with_wget_and_curl(case_stack, cases, tmp_path):
    # 100 CJK characters made a 304-byte name: wget cut it inside a character and lost
    # the extension, and open() failed. Names are now at most 150 bytes (wget keeps about
    # 157 bytes of CJK), cut between characters, with the extension kept.
    import shutil
    import subprocess

    cases.pages = [page([{"id": 1}, {"id": 2}], columns=[("id", "INTEGER")])]
    client = case_stack.client(perms=PERMS)
    name = "九月华东区订单" * 15  # 105 characters; taskName takes 100
    answer = create(client, "xlsx", exportType="CASES", taskName=name[:100])
    detail = wait_state(client, answer.json()["taskId"])
    expected = name[:48] + ".xlsx"
    assert detail["fileName"] == expected and len(expected.encode()) == 149
    url = case_stack.url + detail["downloadUrl"]
    for tool, command, saved_as in (
        ("wget", ["wget", "-q", "--content-disposition", url], expected),
        # curl -J reads only the ASCII filename parameter.
        ("curl", ["curl", "-sS", "-f", "-O", "-J", url], "export.xlsx"),
    ):
        folder = tmp_path / tool
        folder.mkdir()
        assert shutil.which(tool), f"{tool} is needed for this test"
        subprocess.run(command, cwd=folder, check=True, timeout=60)
        files = [p.name for p in folder.iterdir()]
        assert files == [saved_as], files
        rows = list(openpyxl.load_workbook(folder / saved_as).worksheets[0].values)
        assert rows == [("id",), (1,), (2,)]


# --- Provider contract: repeated cursors, keys of the rows, exact numbers ---------------


def test_a_cursor_that_comes_back_fails_at_once_naming_it(case_stack, cases):
    # A -> B -> A -> B ...: before, 41 calls of duplicated rows until the row cap.
    cols = [("id", "INTEGER")]
    cases.cursor_pages = {"A": 1, "B": 2}
    cases.pages = [
        page([{"id": 1}], columns=cols, more=True, cursor="A"),
        page([{"id": 2}], more=True, cursor="B"),
        page([{"id": 3}], more=True, cursor="A"),
    ]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["attempts"] == 1
    assert detail["error"] == {
        "code": "PROVIDER_CONTRACT",
        "message": "fetch: batch 3 (cursor B): provider broke the contract: nextCursor 'A' of "
        "batch 3 repeats the cursor already sent for batch 2 (the provider pages in a loop)",
    }
    assert [r["cursor"] for r in cases.requests] == [None, "A", "B"]
    assert list(case_stack.runtime.storage.list()) == []


def test_a_long_repeated_cursor_is_shortened_in_the_message(case_stack, cases):
    long = "c" * 300
    cases.cursor_pages = {long: 1}
    cases.pages = [
        page([{"id": 1}], columns=[("id", "INTEGER")], more=True, cursor=long),
        page([{"id": 2}], more=True, cursor=long),
    ]
    detail, _ = run(case_stack, "csv")
    message = detail["error"]["message"]
    assert message.startswith(f"fetch: batch 2 (cursor {'c' * 40}): provider broke the contract")
    assert f"nextCursor '{'c' * 37}...' of batch 2 repeats the cursor already sent for batch 2" in (
        message
    )
