"""qa_pairs.kind / answer_type / paraphrase: where a gold pair comes from (labelled value, table
cell, vote table, sentence, llm), the type of its answer and whether its question is phrased with
other words than its evidence; documents.gold_report: the gold pairs generated, stored and
rejected per reason at the last generation

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("qa_pairs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("answer_type", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("paraphrase", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gold_report", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_column("gold_report")
    with op.batch_alter_table("qa_pairs", schema=None) as batch_op:
        batch_op.drop_column("paraphrase")
        batch_op.drop_column("answer_type")
        batch_op.drop_column("kind")
