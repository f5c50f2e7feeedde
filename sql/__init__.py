"""SQL schema migrations (Alembic); applied by ragaudit.platform.db.migrate at start-up."""
