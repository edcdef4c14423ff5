"""alertmanager alerts: what is firing (and resolves not yet told) for the Alertmanager sink

One row per finding pushed as an alert: its labels and annotations, when it started, and,
once resolved, when it ended and which Alertmanagers have accepted the resolve. Firing rows
are re-sent every resend interval (so a restarted dispatcher or Alertmanager gets them
again); a resolved row is deleted once every configured Alertmanager took it. ``change`` numbers
every write from one sequence, taken under the notify consumer's advisory lock, so changes
commit in ``change`` order and a pusher reads "what changed after N" without missing one.

Other branches may add migrations numbered 0009 too; this one's slug is
``alertmanager_alerts`` so it can be renumbered.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEXT = "nextval('notify_alerts_change')"


def upgrade() -> None:
    op.execute("CREATE SEQUENCE notify_alerts_change")
    op.create_table(
        "notify_alerts",
        sa.Column("finding_id", sa.String(64), primary_key=True),
        sa.Column("labels", postgresql.JSONB(), nullable=False),
        sa.Column("annotations", postgresql.JSONB(), nullable=False),
        sa.Column("generator_url", sa.Text(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_to", postgresql.JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "change",
            sa.BigInteger(),
            server_default=sa.text("nextval('notify_alerts_change')"),
            nullable=False,
        ),
    )
    op.create_index("ix_notify_alerts_change", "notify_alerts", ["change"])


def downgrade() -> None:
    op.drop_index("ix_notify_alerts_change", table_name="notify_alerts")
    op.drop_table("notify_alerts")
    op.execute("DROP SEQUENCE notify_alerts_change")
