"""corroboration by uid and change: what the watch saw of each job version, one change per verdict

The verdict on an admission record compared only namespace, kind, name and verb, so any change
of the object (a status update) bore out any claim about it, and one change bore out any number
of records. Now (``controller.store.corroboration``):

- ``watch_changes`` keeps what a claim is compared with: ``generation``, ``created_at``, the spec
  summary (``spec``) and ``labels`` of each version, and an index by uid;
- ``admission_corroborations`` gets ``claim`` (the watched change a ``verified`` record took:
  ``<uid>/create``, ``<uid>/delete`` or ``<uid>/<resourceVersion>``; unique, so one change bears
  out one record), ``resource_version`` and ``detail`` (why, in words), and the verdicts
  ``contradicted``, ``unobservable`` and ``unjudged``;
- every admission record is judged now, not only ``caller: unverified`` ones; those recorded
  before this revision without a verdict (from the API server's certificate, or without
  ``caller``) are marked ``unjudged``: the watch history to judge them by is gone.

Verdicts decided before this revision stay as they were (by name and verb).
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import JSONB, TS, replace_check

revision: str = "0010"
down_revision: str | None = "0009"

_STATUS = "ck_admission_corroborations_status"
_BEFORE = ("verified", "unmatched")
_AFTER = ("verified", "contradicted", "unmatched", "unobservable", "unjudged")


def upgrade() -> None:
    op.add_column("watch_changes", sa.Column("generation", sa.BigInteger, nullable=True))
    op.add_column("watch_changes", sa.Column("created_at", TS, nullable=True))
    op.add_column("watch_changes", sa.Column("spec", JSONB, nullable=True))
    op.add_column("watch_changes", sa.Column("labels", JSONB, nullable=True))
    op.create_index("ix_watch_changes_uid", "watch_changes", ["uid", "observed_at"])
    op.add_column("admission_corroborations", sa.Column("claim", sa.String(160), nullable=True))
    op.add_column("admission_corroborations", sa.Column("resource_version", sa.String(64), nullable=True))
    op.add_column("admission_corroborations", sa.Column("detail", sa.Text, nullable=True))
    op.create_index("uq_admission_corroborations_claim", "admission_corroborations", ["claim"], unique=True)
    replace_check(_STATUS, "admission_corroborations", "status", _AFTER)
    op.execute(
        """
        INSERT INTO admission_corroborations (audit_seq, status, decided_at, detail)
        SELECT a.seq, 'unjudged', now(), 'recorded before every admission record was judged'
        FROM audit_records a
        WHERE a.source = 'admission' AND coalesce(a.record->>'caller', '') <> 'unverified'
          AND NOT EXISTS (SELECT 1 FROM admission_corroborations c WHERE c.audit_seq = a.seq)
        """
    )


def downgrade() -> None:
    op.execute(f"DELETE FROM admission_corroborations WHERE status NOT IN {_BEFORE!r}")
    replace_check(_STATUS, "admission_corroborations", "status", _BEFORE)
    op.drop_index("uq_admission_corroborations_claim", table_name="admission_corroborations")
    for column in ("detail", "resource_version", "claim"):
        op.drop_column("admission_corroborations", column)
    op.drop_index("ix_watch_changes_uid", table_name="watch_changes")
    for column in ("labels", "spec", "created_at", "generation"):
        op.drop_column("watch_changes", column)
