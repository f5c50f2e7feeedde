"""ingestion progress and provenance: documents.status widened to the run stages (queued, extracting,
chunking, embedding, indexing, ready, failed), progress counters (pages / chunks done of total), the
strategy a queued run builds, what the live version was built with (``built_with`` JSON + its
``build_fingerprint``) and, for landing-folder documents, the source file path

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pages_done", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("pages_total", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("chunks_done", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("chunks_total", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("pending_strategy", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("built_with", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("build_fingerprint", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("source_path", sa.Text(), nullable=True))
        batch_op.create_index("ix_documents_status", ["status"])
    # "pending" (the old in-progress status) is "queued" now: the serving process re-runs them
    op.execute("UPDATE documents SET status = 'queued' WHERE status = 'pending'")


def downgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_index("ix_documents_status")
        for col in (
            "source_path",
            "build_fingerprint",
            "built_with",
            "queued_at",
            "pending_strategy",
            "chunks_total",
            "chunks_done",
            "pages_total",
            "pages_done",
        ):
            batch_op.drop_column(col)
