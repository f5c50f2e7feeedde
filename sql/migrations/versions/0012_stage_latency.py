"""query_logs.document_ms, neighbors_ms and gate_ms: latency of the named-document leg, the
neighbour-chunk expansion and the answerability gate, so /metrics reports their P50/P95 like the
other stages

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("document_ms", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("neighbors_ms", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("gate_ms", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.drop_column("gate_ms")
        batch_op.drop_column("neighbors_ms")
        batch_op.drop_column("document_ms")
