"""outbox leases: a claim's lease in a column no index holds, and room on each page for updates

A claim used to lease a delivery by moving ``next_attempt_at`` (a column of the due index) out by
the lease, so every claim wrote a new entry into each of the outbox's five indexes. The lease now
has a column of its own, ``leased_until``, that no index holds, and the outbox table leaves
``FILLFACTOR`` per cent of each page for new row versions, so a claim is a HOT update: one new
row version on the same page, no index entry (``controller.store.outbox``). A lease taken
before the upgrade stays in ``next_attempt_at`` and runs out as it did; the downgrade moves the
leases still running back there.
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import TS

revision: str = "0017"
down_revision: str | None = "0016"

FILLFACTOR = 50
"""Per cent of each new page filled by inserts (existing pages keep theirs until rewritten)."""


def upgrade() -> None:
    op.add_column("deliveries", sa.Column("leased_until", TS, nullable=True))
    op.execute(f"ALTER TABLE deliveries SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    op.execute(
        "UPDATE deliveries SET next_attempt_at = leased_until"
        " WHERE status = 'pending' AND leased_until > next_attempt_at"
    )
    op.execute("ALTER TABLE deliveries RESET (fillfactor)")
    op.drop_column("deliveries", "leased_until")
