"""document identity: documents.name_key (NFC name, unique per knowledge base), chunks staged per
ingest version (chunks.ingest_version, chunks.live) so a run's rows are invisible until it publishes

Revision ID: 0004
Revises: 0003
"""

import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name_key", sa.String(length=512), nullable=True))
    conn = op.get_bind()
    docs = sa.table(
        "documents", sa.column("id", sa.String), sa.column("doc_name", sa.String), sa.column("name_key", sa.String)
    )
    for doc_id, name in conn.execute(sa.select(docs.c.id, docs.c.doc_name)).all():
        conn.execute(docs.update().where(docs.c.id == doc_id).values(name_key=unicodedata.normalize("NFC", name)))
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.alter_column("name_key", existing_type=sa.String(length=512), nullable=False)
        batch_op.drop_constraint("uq_documents_kb_name", type_="unique")
        batch_op.create_unique_constraint("uq_documents_kb_name_key", ["knowledge_base", "name_key"])
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ingest_version", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("live", sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("chunks", schema=None) as batch_op:
        batch_op.drop_column("live")
        batch_op.drop_column("ingest_version")
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_constraint("uq_documents_kb_name_key", type_="unique")
        batch_op.create_unique_constraint("uq_documents_kb_name", ["knowledge_base", "doc_name"])
        batch_op.drop_column("name_key")
