"""disputed corroborations: two records without the API server's certificate that claim one change

A record posted *before* the change it claims took the change first, and the genuine record was
``unmatched``. Now (``controller.store.corroboration``) a later claimant contests the change: a
record from the API server's certificate takes it from a holder without one, and between two
records without it both are ``disputed``, each naming the other. Verdicts stay append-only (the
runtime role still may not update them): the later record's row names the holder in the new
column ``rival`` (indexed), and the holder's verdict is read through it. This adds the verdict
``disputed`` and ``rival``; existing verdicts stay as they were.
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import replace_check

revision: str = "0015"
down_revision: str | None = "0014"

_STATUS = "ck_admission_corroborations_status"
_BEFORE = ("verified", "contradicted", "unmatched", "unobservable", "unjudged")
_AFTER = (*_BEFORE, "disputed")


def upgrade() -> None:
    op.add_column("admission_corroborations", sa.Column("rival", sa.BigInteger, nullable=True))
    op.create_index("ix_admission_corroborations_rival", "admission_corroborations", ["rival"])
    replace_check(_STATUS, "admission_corroborations", "status", _AFTER)


def downgrade() -> None:
    op.execute("UPDATE admission_corroborations SET status = 'unmatched' WHERE status = 'disputed'")
    replace_check(_STATUS, "admission_corroborations", "status", _BEFORE)
    op.drop_index("ix_admission_corroborations_rival", table_name="admission_corroborations")
    op.drop_column("admission_corroborations", "rival")
