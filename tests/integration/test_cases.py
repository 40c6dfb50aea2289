"""../shared/cases/CASES.md through the whole pipeline: provider over HTTP -> client
checks -> writer -> stored file, read back with Python's csv module and openpyxl.

The writer-level tests of the same cases are in tests/unit/test_*_writer.py; these show
the export center end to end (task state, stored file, download).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import zipfile

import openpyxl
import orjson
import pytest

from tests.support.cases_provider import CASES_TOKEN as TOKEN
from tests.support.cases_provider import cases_registry
from tests.support.helpers import create, download, read_csv, wait_state
from tests.unit.writer_helpers import FORMULA_LIKE

PERMS = ["export:cases:create", "export:orders:create"]


@pytest.fixture
def case_stack(make_stack, cases, tmp_path):
    return make_stack(
        export_types_file=str(cases_registry(tmp_path, cases.url)),
        provider={"internal_token": TOKEN},
        task={"time_zone": "Asia/Shanghai"},
    )


def page(
    rows,
    *,
    columns=None,
    more=False,
    cursor=None,
    raw_rows: str | None = None,
    row_format: str | None = None,
) -> str:
    body = {
        "schemaVersion": 1,
        "schemaHash": "sha256:cases",
        "snapshotToken": "snap",
        "rows": [],
        "nextCursor": cursor,
        "hasMore": more,
        "totalRows": None,
    }
    if columns is not None:
        body["columns"] = [{"key": k, "title": k, "type": t} for k, t in columns]
    if row_format is not None:
        body["rowFormat"] = row_format
    text = orjson.dumps(body).decode()
    return text.replace(
        '"rows":[]', '"rows":' + (raw_rows if raw_rows is not None else orjson.dumps(rows).decode())
    )


def run(stack, fmt: str, export_type: str = "CASES", **params):
    client = stack.client(perms=PERMS)
    answer = create(client, fmt, exportType=export_type, parameters=params)
    assert answer.status_code == 202, answer.text
    detail = wait_state(client, answer.json()["taskId"], timeout=60)
    data = download(client, detail) if detail["state"] == "succeeded" else b""
    return detail, data


def xlsx_cells(data: bytes):
    wb = openpyxl.load_workbook(io.BytesIO(data))
    return wb.worksheets[0]


def sheet_xml(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return "".join(zf.read(n).decode() for n in zf.namelist() if n.startswith("xl/worksheets/"))


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


def empty_pages(count: int, first: int = 0, columns: bool = True) -> list[str]:
    """``count`` pages without rows that say hasMore; page ``i`` sends cursor ``i + 1``."""
    return [
        page(
            [],
            columns=[("id", "INTEGER")] if columns and i == first else None,
            more=True,
            cursor=str(i + 1),
        )
        for i in range(first, first + count)
    ]


def test_empty_pages_that_keep_saying_has_more_end_the_export_at_100(case_stack, cases):
    # Before: 14,000-26,000 calls a minute until the 30-minute deadline, then again per
    # attempt. Now 100 calls, and no other attempt although the type allows three.
    registry = case_stack.runtime.registry
    registry.types["CASES"] = dataclasses.replace(registry.types["CASES"], max_attempts=3)
    cases.pages = empty_pages(150)
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["attempts"] == 1, detail
    assert detail["error"] == {
        "code": "PROVIDER_CONTRACT",
        "message": "fetch: batch 100 (cursor 99): provider broke the contract: 100 empty pages "
        "in a row said hasMore (last nextCursor '100')",
    }
    assert len(cases.requests) == 100
    assert list(case_stack.runtime.storage.list()) == []


@pytest.mark.parametrize("count", [3, 99])
def test_fewer_than_100_empty_pages_in_a_row_are_followed(case_stack, cases, count):
    """Empty pages before rows, between rows and at the end: the export follows them
    (a provider may filter rows after reading them), and every row is written once."""
    cases.pages = [
        *empty_pages(count),  # pages 0 .. count - 1
        page([{"id": 1}, {"id": 2}], more=True, cursor=str(count + 1)),
        *empty_pages(count, first=count + 1, columns=False),
        page([{"id": 3}], more=True, cursor=str(2 * count + 2)),
        page([]),  # the last page: no rows, no hasMore
    ]
    detail, data = run(case_stack, "csv")
    assert detail["state"] == "succeeded", detail
    assert read_csv(data) == [["id"], ["1"], ["2"], ["3"]]
    assert len(cases.requests) == len(cases.pages) == 2 * count + 3


MIXED = [("id", "INTEGER"), ("name", "STRING"), ("amount", "DECIMAL"), ("day", "DATE")]
MIXED_ROWS = [
    {"id": 1, "name": "张三", "amount": "1.50", "day": "2024-02-29"},
    {"id": 2, "name": "=1+1", "amount": None, "day": None},
    {"id": 3, "name": None, "amount": "-0.10", "day": "2024-03-01"},
]


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_array_rows_give_the_file_of_the_same_object_rows(case_stack, cases, fmt):
    """rowFormat "array" (the SDK's format) over three pages, the middle one sent as
    objects: the same bytes as the whole export sent as objects."""
    arrays = [[row[k] for k, _ in MIXED] for row in MIXED_ROWS]

    def pages(as_arrays: bool) -> list[str]:
        form = "array" if as_arrays else None
        return [
            page(
                arrays[:1] if as_arrays else MIXED_ROWS[:1],
                columns=MIXED,
                more=True,
                cursor="1",
                row_format=form,
            ),
            page(MIXED_ROWS[1:2], more=True, cursor="2"),
            page(arrays[2:] if as_arrays else MIXED_ROWS[2:], row_format=form),
        ]

    files = []
    for as_arrays in (True, False):
        cases.pages = pages(as_arrays)
        detail, data = run(case_stack, fmt)
        assert detail["state"] == "succeeded", detail
        files.append(data)
    if fmt == "csv":
        assert files[0] == files[1]
        assert read_csv(files[0])[1:] == [
            ["1", "张三", "1.50", "2024-02-29"],
            ["2", "'=1+1", "", ""],
            ["3", "", "-0.10", "2024-03-01"],
        ]
    else:
        assert sheet_xml(files[0]) == sheet_xml(files[1])
        ws = xlsx_cells(files[0])
        assert [c.value for c in ws[4]] == [3, None, -0.1, dt.datetime(2024, 3, 1)]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            '[[1,"a","1.00","2024-01-01"],[2,"b","2.00"]]',
            "row 2 is an array of 3 values for 4 columns",
        ),
        ('[[1,"a","1.00","2024-01-01"],{"id":2}]', "row 2 is not an array of 4 values"),
        ('[[1,"a","1.00","2024-01-01",5]]', "row 1 is an array of 5 values for 4 columns"),
    ],
)
def test_array_rows_of_the_wrong_width_break_the_contract(case_stack, cases, raw, message):
    cases.pages = [page([], columns=MIXED, raw_rows=raw, row_format="array")]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed", detail
    assert detail["error"]["code"] == "PROVIDER_CONTRACT"
    assert detail["error"]["message"].endswith("provider broke the contract: " + message)
    assert list(case_stack.runtime.storage.list()) == []


def test_an_unknown_row_format_breaks_the_contract(case_stack, cases):
    cases.pages = [page(MIXED_ROWS, columns=MIXED, row_format="columns")]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["error"]["code"] == "PROVIDER_CONTRACT"
    assert 'rowFormat must be "object" or "array", got \'columns\'' in detail["error"]["message"]


def test_declared_columns_in_no_row_fail_naming_them_and_the_keys_sent(case_stack, cases):
    cols = [("order_id", "INTEGER"), ("customer_name", "STRING"), ("amount", "DECIMAL")]
    rows = [{"order_id": 1, "customerName": "Ann", "amt": "1.50"}]
    cases.pages = [page(rows, columns=cols)]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["error"] == {
        "code": "PROVIDER_CONTRACT",
        "message": "render: batch 1: provider broke the contract: columns 'customer_name', "
        "'amount' are in no row of batch 1 (rows carry unknown keys 'customerName', 'amt')",
    }
    assert list(case_stack.runtime.storage.list()) == []


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_undeclared_keys_are_a_warning_and_keys_missing_from_some_rows_empty_cells(
    case_stack, cases, fmt
):
    cols = [("id", "INTEGER"), ("name", "STRING")]
    cases.pages = [
        page(
            [{"id": 1, "name": "Ann", "x": 1}, {"id": 2, "y": 2}],
            columns=cols,
            more=True,
            cursor="1",
        ),
        page([{"id": 3, "name": "Cy", "x": 3}]),
    ]
    detail, data = run(case_stack, fmt)
    assert detail["state"] == "succeeded", detail
    assert detail["warning"] == "rows carried undeclared keys 'x', 'y' (ignored)"
    if fmt == "csv":
        assert read_csv(data) == [["id", "name"], ["1", "Ann"], ["2", ""], ["3", "Cy"]]
    else:
        ws = xlsx_cells(data)
        assert [[c.value for c in r] for r in ws.iter_rows()] == [
            ["id", "name"],
            [1, "Ann"],
            [2, None],
            [3, "Cy"],
        ]


NUMBER_COLUMNS = [("amount", "DECIMAL"), ("qty", "INTEGER"), ("note", "STRING")]
NUMBER_ROWS = (
    '[{"amount":0E-8,"qty":18446744073709551616,"note":18446744073709551616},'
    '{"amount":12345678901234567.89,"qty":1.0,"note":0.10},'
    '{"amount":-0.10,"qty":-0,"note":1.0E+2},'
    '{"amount":18446744073709551616,"qty":7,"note":1e400}]'
)


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_json_numbers_are_written_with_the_exact_digits_sent(case_stack, cases, fmt):
    # orjson reads these as floats: before, 0.0, 12345678901234568, -0.1 and
    # 18446744073709552000, SUCCEEDED without a warning.
    cases.pages = [
        page([], columns=NUMBER_COLUMNS, raw_rows=NUMBER_ROWS, more=True, cursor="1"),
        page([], raw_rows='[{"amount":"5.00","qty":8,"note":"conforming batch"}]'),
    ]
    detail, data = run(case_stack, fmt)
    assert detail["state"] == "succeeded" and detail["warning"] is None, detail
    if fmt == "csv":
        assert read_csv(data)[1:] == [
            ["0.00000000", "18446744073709551616", "18446744073709551616"],
            ["12345678901234567.89", "1", "0.10"],
            ["-0.10", "0", "100"],
            ["18446744073709551616", "7", "1E+400"],
            ["5.00", "8", "conforming batch"],
        ]
        return
    ws = xlsx_cells(data)
    cells = [[c.value for c in r] for r in ws.iter_rows(min_row=2)]
    assert cells == [
        [0, "18446744073709551616", "18446744073709551616"],
        ["12345678901234567.89", 1, "0.10"],  # 19 significant digits: text, never rounded
        [-0.1, 0, "100"],
        ["18446744073709551616", 7, "1E+400"],
        [5, 8, "conforming batch"],
    ]
    assert [ws.cell(row=r, column=1).number_format for r in (2, 4, 6)] == [
        "#,##0.00000000",
        "#,##0.00",
        "#,##0.00",
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"amount":"1","qty":1.5,"note":"x"}', "row 2, column qty: not an integer: 1.5"),
        (
            '{"amount":0.1234567890123456789012345678901234567890,"qty":1,"note":"x"}',
            "row 2, column amount: decimal has 40 digits, more than 38",
        ),
        ('{"amount":1e400,"qty":1,"note":"x"}', "row 2, column amount: decimal exponent out"),
        ('{"amount":"1","qty":1e400,"note":"x"}', "row 2, column qty: integer out of range"),
    ],
)
def test_numbers_that_cannot_be_kept_exactly_fail_naming_row_and_column(
    case_stack, cases, row, message
):
    raw = '[{"amount":"1","qty":1,"note":"x"},' + row + "]"
    cases.pages = [page([], columns=NUMBER_COLUMNS, raw_rows=raw)]
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed" and detail["error"]["code"] == "INVALID_VALUE", detail
    assert detail["error"]["message"].startswith("render: batch 1: " + message)
    assert list(case_stack.runtime.storage.list()) == []


# --- BOOLEAN cells sent as 1/0, and what a STRING column takes ---------------------------

FLAG_COLUMNS = [("id", "INTEGER"), ("paid", "BOOLEAN"), ("note", "STRING")]


def flag_pages(paid: list[str], note: list[str]) -> list[str]:
    """Two pages of raw rows: ``paid`` and ``note`` are JSON texts, one per row."""
    rows = [
        f'{{"id":{i + 1},"paid":{p},"note":{n}}}'
        for i, (p, n) in enumerate(zip(paid, note, strict=True))
    ]
    half = len(rows) // 2
    return [
        page(
            [],
            columns=FLAG_COLUMNS,
            raw_rows="[" + ",".join(rows[:half]) + "]",
            more=True,
            cursor="1",
        ),
        page([], raw_rows="[" + ",".join(rows[half:]) + "]"),
    ]


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_boolean_cells_sent_as_1_and_0_give_the_cells_of_true_and_false(case_stack, cases, fmt):
    # Before: a MySQL TINYINT(1) provider failed the export ("expected a boolean, got 1").
    note = ["true", "false", "1", "null"]  # a STRING column: each scalar as its JSON text
    cases.pages = flag_pages(["true", "false", "null", "true"], note)
    words, words_file = run(case_stack, fmt)
    cases.pages = flag_pages(["1", "0", "null", "1"], note)
    numbers, numbers_file = run(case_stack, fmt)
    assert words["state"] == numbers["state"] == "succeeded", (words, numbers)
    if fmt == "csv":
        expected = [
            ["id", "paid", "note"],
            ["1", "true", "true"],
            ["2", "false", "false"],
            ["3", "", "1"],
            ["4", "true", ""],
        ]
        assert read_csv(words_file) == read_csv(numbers_file) == expected
        assert words_file == numbers_file
        return
    got = [
        [[c.value for c in r] for r in xlsx_cells(f).iter_rows()]
        for f in (words_file, numbers_file)
    ]
    assert (
        got[0]
        == got[1]
        == [
            ["id", "paid", "note"],
            [1, True, "true"],
            [2, False, "false"],
            [3, None, "1"],
            [4, True, None],
        ]
    )
    types = [[c.data_type for c in r] for r in xlsx_cells(numbers_file).iter_rows(min_row=2)]
    assert [t[1] for t in types] == ["b", "b", "n", "b"]  # booleans, an empty cell


@pytest.mark.parametrize(
    ("paid", "note", "message"),
    [
        ("2", '"x"', "row 3, column paid: expected a boolean (true, false, 1 or 0), got 2"),
        ("-1", '"x"', "row 3, column paid: expected a boolean (true, false, 1 or 0), got -1"),
        ('"1"', '"x"', "row 3, column paid: expected a boolean (true, false, 1 or 0), got '1'"),
        (
            "1.0",
            '"x"',
            "row 3, column paid: expected a boolean (true, false, 1 or 0), got 1.0 (a number "
            "written with a fraction or an exponent)",
        ),
        (
            "1e0",
            '"x"',
            "row 3, column paid: expected a boolean (true, false, 1 or 0), got 1 (a number "
            "written with a fraction or an exponent)",
        ),
        ("true", "[1, 2]", "row 3, column note: expected a string, got list: [1, 2]"),
        ("true", '{"a": 1}', "row 3, column note: expected a string, got dict: {'a': 1}"),
    ],
)
def test_other_boolean_cells_and_nested_strings_fail_naming_row_and_column(
    case_stack, cases, paid, note, message
):
    cases.pages = flag_pages(["true", "1", paid, "0"], ['"a"', '"b"', note, '"d"'])
    detail, _ = run(case_stack, "csv")
    assert detail["state"] == "failed", detail
    assert detail["error"]["code"] == "INVALID_VALUE"
    assert detail["error"]["message"] == f"render: batch 2 (cursor 1): {message}"
    assert list(case_stack.runtime.storage.list()) == []
