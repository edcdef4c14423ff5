"""notifications (placeholder: filled in by the notifications work)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 07:35:00
"""

from collections.abc import Sequence

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
