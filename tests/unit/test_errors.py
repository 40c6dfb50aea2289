"""The exception tree drawn in ``errors.py``'s docstring is the real hierarchy: every
error of the module is drawn under its own parent, and the transport's error is one of
them (under the root, the same class as ``export_center.transport.TransportError``)."""

from __future__ import annotations

import inspect
import re

from export_center import errors, transport
from export_center.transport import base

_NODE = re.compile(r"^(?P<indent>[ │]*)(?:[├└]── )?(?P<name>[A-Z]\w+)")


def _drawn_parents() -> dict[str, str | None]:
    """``{class: its parent}`` as the docstring draws them (the root's parent is None)."""
    doc = errors.__doc__ or ""
    block = doc.split("::", 1)[1].split("\n\n", 2)[1]
    parents: dict[str, str | None] = {}
    stack: list[str] = []  # stack[depth] = the class drawn at that depth
    for line in block.splitlines():
        body = line[4:]  # the literal block is indented four spaces
        match = _NODE.match(body)
        if match is None or "── " not in body and stack:
            continue  # a continuation line of a description
        depth = 0 if "── " not in body else len(match["indent"]) // 4 + 1
        del stack[depth:]
        parents[match["name"]] = stack[-1] if stack else None
        stack.append(match["name"])
    return parents


def _real_parents() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.ExportCenterError) and cls.__module__ == errors.__name__:
            parent = cls.__bases__[0]
            found[name] = None if cls is errors.ExportCenterError else parent.__name__
    return found


def test_the_drawn_tree_is_the_hierarchy():
    drawn = _drawn_parents()
    assert drawn == _real_parents()
    assert drawn["ExportCancelled"] == "ExportCenterError"
    assert drawn["TransportError"] == "ExportCenterError"
    assert set(drawn) - {"ExportCenterError"} <= set(errors.__all__)


def test_the_transport_error_is_the_project_error_callers_catch():
    assert transport.TransportError is base.TransportError is errors.TransportError
    assert issubclass(errors.TransportError, errors.ExportCenterError)
    # Nothing that catches an attempt's or a request's failure catches it.
    for family in (errors.ExportFailure, errors.RequestError, errors.StorageError):
        assert not issubclass(errors.TransportError, family)
