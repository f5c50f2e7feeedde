"""Alembic environment: uses the connection handed over by ragaudit.platform.db.migrate (or a URL)."""

from alembic import context
from sqlalchemy import create_engine

from ragaudit.platform.db import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    conn = config.attributes.get("connection")
    if conn is None:
        engine = create_engine(config.get_main_option("sqlalchemy.url"))
        with engine.begin() as conn:
            context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
            context.run_migrations()
        return
    context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
    context.run_migrations()


run()
