"""Metadata database: SQLAlchemy 2 models, engine/session factories, repositories."""
