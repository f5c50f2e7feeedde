"""query_logs.cost_usd nullable: NULL records an unknown cost (a model without a price in litellm's map)

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.alter_column("cost_usd", existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE query_logs SET cost_usd = 0 WHERE cost_usd IS NULL")
    with op.batch_alter_table("query_logs", schema=None) as batch_op:
        batch_op.alter_column("cost_usd", existing_type=sa.Float(), nullable=False)
