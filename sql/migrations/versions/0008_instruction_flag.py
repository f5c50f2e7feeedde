"""chunks.instruction_like / instruction_score: the chunk holds a passage that reads as an
instruction to an assistant (ragaudit.text.injection); existing rows are not scanned (score NULL)

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("instruction_like", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("instruction_score", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.drop_column("instruction_score")
        batch_op.drop_column("instruction_like")
