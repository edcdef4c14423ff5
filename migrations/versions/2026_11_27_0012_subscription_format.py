"""subscription format: a webhook may receive CloudEvents (binary or structured mode)

``subscriptions.format`` is ``standard`` (the event as one JSON object, as before),
``cloudevents`` or ``cloudevents-structured`` (:mod:`controller.contract.cloudevents`).
Existing rows get ``standard``.

Other branches may add migrations numbered 0009/0010 too; this one's slug is
``subscription_format`` so it can be renumbered.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 04:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "subscriptions", sa.Column("format", sa.String(32), server_default="standard", nullable=False)
    )


def downgrade() -> None:
    op.drop_column("subscriptions", "format")
