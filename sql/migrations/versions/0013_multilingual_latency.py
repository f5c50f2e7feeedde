"""query_logs.multilingual_ms: latency of the multilingual leg (the question's e5 embedding and
its search), so /metrics reports its P50/P95 like the other stages

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("multilingual_ms", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.drop_column("multilingual_ms")
