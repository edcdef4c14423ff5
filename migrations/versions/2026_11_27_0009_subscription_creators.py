"""subscription creators: who made a subscription, as the API authenticated them, to re-check them

A subscription delivers what its creator could read when they made it. To stop it when they
can no longer read it, the API re-checks the creator periodically (``api.subscription_recheck_s``)
with the identity their token stood for: ``creator`` holds its uid, groups and extra attributes
(the username stays in ``created_by``). A subscription whose creator lost access is
``suspended``, a new state in the same ``state`` column, and resumes when the access returns.

The column is nullable: subscriptions made before this migration have no recorded groups; they
are re-checked by username alone until their creator next changes them (which records the
identity again).
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import JSONB

revision: str = "0009"
down_revision: str | None = "0008"


def upgrade() -> None:
    op.add_column(
        "subscriptions",
        sa.Column("creator", JSONB, nullable=True),
    )


def downgrade() -> None:
    op.execute("UPDATE subscriptions SET state = 'disabled' WHERE state = 'suspended'")
    op.drop_column("subscriptions", "creator")
