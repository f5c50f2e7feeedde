"""telemetry: query_logs.cache_source_id (cache hits name the row they reuse), index_state (cache invalidation counter)

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cache_source_id", sa.String(length=32), nullable=True))
    index_state = op.create_table(
        "index_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(index_state, [{"id": 1, "version": 0}])


def downgrade() -> None:
    op.drop_table("index_state")
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.drop_column("cache_source_id")
