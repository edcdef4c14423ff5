"""disputed corroborations: two records without the API server's certificate that claim one change

A record posted *before* the change it claims took the change first, and the genuine record was
``unmatched``. Now (``controller.store.corroboration``) a later claimant contests the change: a
record from the API server's certificate takes it from a holder without one, and between two
records without it both are ``disputed``, each naming the other. Verdicts stay append-only (the
runtime role still may not update them): the later record's row names the holder in the new
column ``rival`` (indexed), and the holder's verdict is read through it. This adds the verdict
``disputed`` and ``rival``; existing verdicts stay as they were.

Other branches may add migrations numbered 0015 too; this one's slug is
``disputed_corroborations`` so it can be renumbered.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = ("verified", "contradicted", "unmatched", "unobservable", "unjudged")
_AFTER = (*_BEFORE, "disputed")


def _check(statuses: Sequence[str]) -> None:
    op.drop_constraint("ck_admission_corroborations_status", "admission_corroborations", type_="check")
    op.create_check_constraint(
        "ck_admission_corroborations_status",
        "admission_corroborations",
        f"status IN ({', '.join(repr(s) for s in statuses)})",
    )


def upgrade() -> None:
    op.add_column("admission_corroborations", sa.Column("rival", sa.BigInteger, nullable=True))
    op.create_index("ix_admission_corroborations_rival", "admission_corroborations", ["rival"])
    _check(_AFTER)


def downgrade() -> None:
    op.execute("UPDATE admission_corroborations SET status = 'unmatched' WHERE status = 'disputed'")
    _check(_BEFORE)
    op.drop_index("ix_admission_corroborations_rival", table_name="admission_corroborations")
    op.drop_column("admission_corroborations", "rival")
