"""notifications: subscriptions, the delivery outbox and its attempt log, notices, consumer state"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import JSONB, TS

revision: str = "0003"
down_revision: str | None = "0002"


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=True),
        sa.Column("job_name", sa.String(length=253), nullable=True),
        sa.Column("label_selector", sa.Text(), nullable=True),
        sa.Column("event_types", JSONB, nullable=False),
        sa.Column("rules", JSONB, nullable=False),
        sa.Column("severities", JSONB, nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("recipients", JSONB, nullable=False),
        sa.Column("secret", sa.Text(), nullable=True),
        sa.Column("previous_secret", sa.Text(), nullable=True),
        sa.Column("previous_secret_until", TS, nullable=True),
        sa.Column("one_shot", sa.Boolean(), nullable=False),
        sa.Column("expires_at", TS, nullable=True),
        sa.Column("fired_at", TS, nullable=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=253), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("failing_since", TS, nullable=True),
        sa.Column("disabled_at", TS, nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_subscriptions_state_ns", "subscriptions", ["state", "namespace"], unique=False)
    op.create_table(
        "deliveries",
        sa.Column("seq", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("subscription_id", sa.String(length=40), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("event_type", sa.String(length=32), nullable=False),
        sa.Column("order_key", sa.Text(), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("job_name", sa.String(length=253), nullable=False),
        sa.Column("job_uid", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("event_at", TS, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_latency_ms", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index(
        "ix_deliveries_due",
        "deliveries",
        ["next_attempt_at", "seq"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_deliveries_chain",
        "deliveries",
        ["subscription_id", "order_key", "seq"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_deliveries_sub_seq", "deliveries", ["subscription_id", "seq"], unique=False)
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("delivery_seq", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["delivery_seq"], ["deliveries.seq"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_delivery_attempts_delivery_seq"), "delivery_attempts", ["delivery_seq"], unique=False
    )
    op.create_table(
        "subscription_notices",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("subscription_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.ForeignKeyConstraint(["subscription_id"], ["subscriptions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_subscription_notices_subscription_id"),
        "subscription_notices",
        ["subscription_id"],
        unique=False,
    )
    op.create_table(
        "notify_jobs",
        sa.Column("uid", sa.String(length=64), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("labels", JSONB, nullable=False),
        sa.Column("resource_version", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("uid"),
    )
    op.create_table(
        "notify_findings",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("notify_findings")
    op.drop_table("notify_jobs")
    op.drop_index(op.f("ix_subscription_notices_subscription_id"), table_name="subscription_notices")
    op.drop_table("subscription_notices")
    op.drop_index(op.f("ix_delivery_attempts_delivery_seq"), table_name="delivery_attempts")
    op.drop_table("delivery_attempts")
    op.drop_index("ix_deliveries_sub_seq", table_name="deliveries")
    op.drop_index(
        "ix_deliveries_chain", table_name="deliveries", postgresql_where=sa.text("status = 'pending'")
    )
    op.drop_index(
        "ix_deliveries_due", table_name="deliveries", postgresql_where=sa.text("status = 'pending'")
    )
    op.drop_table("deliveries")
    op.drop_index("ix_subscriptions_state_ns", table_name="subscriptions")
    op.drop_table("subscriptions")
