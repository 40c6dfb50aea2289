"""Metric names in PromQL expressions of the dashboard and the alert rules.

A small reader, not a parser: it drops strings, label matchers, range and offset
durations, grouping label lists and Grafana variables, then keeps every identifier
that is not a function call or a keyword. promtool (tests/integration) checks the
expressions really parse.
"""

from __future__ import annotations

import re

__all__ = ["metric_names", "substitute_grafana_variables"]

_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
    | {"unless", "offset", "inf", "nan", "atan2"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?")


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects, e.g. ``{"up"}`` for ``count(up{job="x"} == 0)``."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    text = _VARIABLE.sub(" ", text)
    text = re.sub(r"\boffset\s+\S+", " ", text)
    return {
        m.group(1)
        for m in _IDENTIFIER.finditer(text)
        if not m.group(2) and m.group(1) not in _KEYWORDS
    }


def substitute_grafana_variables(expr: str, job: str = "export-center") -> str:
    """``expr`` with the dashboard's Grafana variables replaced by PromQL values."""
    return expr.replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$job", job)
