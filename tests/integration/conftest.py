"""Fixtures of the integration tests that more than one module uses."""

from __future__ import annotations

import pytest

from tests.support.cases_provider import CASES_TOKEN as TOKEN
from tests.support.cases_provider import cases_registry


@pytest.fixture
def case_stack(make_stack, cases, tmp_path):
    """A stack whose CASES type is served by the scripted cases provider (Shanghai time)."""
    return make_stack(
        export_types_file=str(cases_registry(tmp_path, cases.url)),
        provider={"internal_token": TOKEN},
        task={"time_zone": "Asia/Shanghai"},
    )
