"""The Markdown tables of the bench's report (``python -m bench`` and its parts)."""

from __future__ import annotations

__all__ = ["markdown_table"]


def markdown_table(headers: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> str:
    """A Markdown table; columns in ``left`` are left-aligned, the others right-aligned.

    Args:
        headers: the column names.
        rows: the cells, one list of ``len(headers)`` strings per row.
        left: indexes of the left-aligned columns (text); the others are numbers.

    Returns:
        The table's lines, joined by newlines (no trailing newline).
    """
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = (
        "|"
        + "|".join(
            "-" * (w + 2) if i in left else "-" * (w + 1) + ":" for i, w in enumerate(widths)
        )
        + "|"
    )
    body = [
        "| "
        + " | ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        + " |"
        for r in rows
    ]
    return "\n".join([line, rule, *body])
