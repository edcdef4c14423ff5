"""notifications: subscriptions, the delivery outbox and its attempt log, notices, consumer state"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import columns

revision: str = "0003"
down_revision: str | None = "0002"


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        *columns("""
        id                     varchar(40)   not null
        channel                varchar(16)   not null
        state                  varchar(16)   not null
        namespace              varchar(253)  null
        job_name               varchar(253)  null
        label_selector         text          null
        event_types            jsonb         not null
        rules                  jsonb         not null
        severities             jsonb         not null
        url                    text          null
        recipients             jsonb         not null
        secret                 text          null
        previous_secret        text          null
        previous_secret_until  ts            null
        one_shot               bool          not null
        expires_at             ts            null
        fired_at               ts            null
        description            text          not null
        created_by             varchar(253)  not null
        created_at             ts            not null
        updated_at             ts            not null
        failing_since          ts            null
        disabled_at            ts            null
        disabled_reason        text          null
        """),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_subscriptions_state_ns", "subscriptions", ["state", "namespace"], unique=False)
    op.create_table(
        "deliveries",
        *columns("""
        seq               bigint        not null serial
        id                varchar(40)   not null
        subscription_id   varchar(40)   not null
        channel           varchar(16)   not null
        event_type        varchar(32)   not null
        order_key         text          not null
        namespace         varchar(253)  not null
        job_name          varchar(253)  not null
        job_uid           varchar(64)   not null
        body              text          not null
        status            varchar(16)   not null
        attempts          int           not null
        next_attempt_at   ts            not null
        event_at          ts            not null
        created_at        ts            not null
        finished_at       ts            null
        last_status_code  int           null
        last_error        text          null
        last_latency_ms   float         null
        """),
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
        *columns("""
        id            bigint       not null serial
        delivery_seq  bigint       not null
        attempt       int          not null
        at            ts           not null
        outcome       varchar(16)  not null
        status_code   int          null
        latency_ms    float        not null
        error         text         null
        """),
        sa.ForeignKeyConstraint(["delivery_seq"], ["deliveries.seq"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_delivery_attempts_delivery_seq"), "delivery_attempts", ["delivery_seq"], unique=False
    )
    op.create_table(
        "subscription_notices",
        *columns("""
        id               bigint       not null serial
        subscription_id  varchar(40)  not null
        kind             varchar(32)  not null
        message          text         not null
        at               ts           not null
        """),
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
        *columns("""
        uid               varchar(64)   not null
        namespace         varchar(253)  not null
        name              varchar(253)  not null
        kind              varchar(16)   not null
        phase             varchar(16)   not null
        labels            jsonb         not null
        resource_version  bigint        not null
        deleted           bool          not null
        """),
        sa.PrimaryKeyConstraint("uid"),
    )
    op.create_table(
        "notify_findings",
        *columns("""
        id        varchar(64)  not null
        status    varchar(16)  not null
        revision  int          not null
        """),
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
