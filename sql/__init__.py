"""SQL schema migrations (Alembic); applied by core.db.migrate at start-up."""
