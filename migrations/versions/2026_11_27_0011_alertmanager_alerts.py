"""alertmanager alerts: what is firing (and resolves not yet told) for the Alertmanager sink

One row per finding pushed as an alert: its labels and annotations, when it started, and,
once resolved, when it ended and which Alertmanagers have accepted the resolve. Firing rows
are re-sent every resend interval (so a restarted dispatcher or Alertmanager gets them
again); a resolved row is deleted once every configured Alertmanager took it. ``change`` numbers
every write from one sequence, taken under the notify consumer's advisory lock, so changes
commit in ``change`` order and a pusher reads "what changed after N" without missing one.
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import JSONB, TS, columns

revision: str = "0011"
down_revision: str | None = "0010"

_NEXT = "nextval('notify_alerts_change')"


def upgrade() -> None:
    op.execute("CREATE SEQUENCE notify_alerts_change")
    op.create_table(
        "notify_alerts",
        *columns("""
        finding_id     varchar(64)  key
        labels         jsonb        not null
        annotations    jsonb        not null
        generator_url  text         not null
        starts_at      ts           not null
        ends_at        ts           null
        """),
        sa.Column("resolved_to", JSONB, server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
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
