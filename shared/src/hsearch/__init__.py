"""hsearch: hybrid dense + sparse search on Milvus (domain package)."""

__version__ = "0.1.0"
