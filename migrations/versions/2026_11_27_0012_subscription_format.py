"""subscription format: a webhook may receive CloudEvents (binary or structured mode)

``subscriptions.format`` is ``standard`` (the event as one JSON object, as before),
``cloudevents`` or ``cloudevents-structured`` (:mod:`controller.contract.cloudevents`).
Existing rows get ``standard``.
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"


def upgrade() -> None:
    op.add_column(
        "subscriptions", sa.Column("format", sa.String(32), server_default="standard", nullable=False)
    )


def downgrade() -> None:
    op.drop_column("subscriptions", "format")
