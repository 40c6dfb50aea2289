"""The lease rules every outbox of the export center shares: the command outbox
(``export_outbox``, the publisher) and the notification outbox
(``export_notification``, the notifier).

Both tables have ``status`` (``PENDING`` -> ``CLAIMED`` -> an end, or back to
``PENDING``), ``next_retry_at``, ``lease_owner``, ``lease_until``, ``attempt_count``
and ``updated_at``. The rules, all on the database clock:

* **claim**: a conditional UPDATE from PENDING and due to CLAIMED, with this owner,
  ``lease_until = now + lease`` and ``attempt_count + 1``. It changes one row or none:
  two workers racing for a row cannot both hold it.
* **held**: a row this owner claimed and still holds. Every later write of the worker
  (sent, failed, dead) is conditioned on it, so a worker whose lease ran out and was
  released cannot overwrite what the next holder did.
* **release**: CLAIMED rows whose lease ran out go back to PENDING, due now (a worker
  died between doing the side effect and recording it: the side effect happens again,
  with the same event id; never not at all).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, and_, update

from export_center.db import db_now, db_now_plus

__all__ = ["CLAIMED", "PENDING", "claim_due", "held", "release_expired", "unclaimed"]

#: The status of a row waiting for a worker.
PENDING = "PENDING"
#: The status of a row a worker holds with a lease.
CLAIMED = "CLAIMED"


def claim_due(
    conn: Connection, table: Table, row_id: int, owner: str, lease_seconds: float
) -> bool:
    """Claim row ``row_id`` of ``table`` when it is PENDING and due (module docstring);
    True when this call holds it now, False when another worker took it or it is not
    due."""
    c = table.c
    claimed = conn.execute(
        update(table)
        .where(c.id == row_id, c.status == PENDING, c.next_retry_at <= db_now())
        .values(
            status=CLAIMED,
            lease_owner=owner,
            lease_until=db_now_plus(lease_seconds),
            attempt_count=c.attempt_count + 1,
            updated_at=db_now(),
        )
    ).rowcount
    return bool(claimed == 1)


def held(table: Table, row_id: int, owner: str) -> ColumnElement[bool]:
    """The condition "row ``row_id`` is CLAIMED by ``owner``" (module docstring)."""
    c = table.c
    return and_(c.id == row_id, c.status == CLAIMED, c.lease_owner == owner)


def unclaimed(status: str) -> dict[str, Any]:
    """Column values of a row leaving its lease for ``status``."""
    return {"status": status, "lease_owner": None, "lease_until": None, "updated_at": db_now()}


def release_expired(conn: Connection, table: Table) -> int:
    """Put the CLAIMED rows of ``table`` whose lease ran out back to PENDING, due now;
    returns how many."""
    c = table.c
    return int(
        conn.execute(
            update(table)
            .where(c.status == CLAIMED, c.lease_until <= db_now())
            .values(**unclaimed(PENDING), next_retry_at=db_now())
        ).rowcount
    )
