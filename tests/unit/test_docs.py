"""Generated documentation stays current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_settings_page_lists_every_setting():
    spec = importlib.util.spec_from_file_location(
        "settings_doc", ROOT / "scripts" / "settings_doc.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "settings.md").read_text() == module.render(), (
        "docs/settings.md is stale: run python scripts/settings_doc.py"
    )
    assert "EXPORT_CENTER_TASK__LEASE_SECONDS" in module.render()
