"""Build the configured vector store from its settings section."""

from __future__ import annotations

from hsearch.config import MilvusSettings
from hsearch.vectorstore.milvus import MilvusVectorStore
from hsearch.vectorstore.schema import DENSE_FIELD, SPARSE_FIELD


def create_vector_store(settings: MilvusSettings, *, uri: str) -> MilvusVectorStore:
    return MilvusVectorStore(
        uri,
        collection=settings.collection,
        token=settings.token.get_secret_value() if settings.token else None,
        hnsw_m=settings.hnsw_m,
        hnsw_ef_construction=settings.hnsw_ef_construction,
        hnsw_ef=settings.hnsw_ef,
        hnsw_max_ef=settings.hnsw_max_ef,
        exact_search_max_rows=settings.exact_search_max_rows,
        write_timeout=settings.write_timeout_s,
        keepalive_s=settings.grpc_keepalive_s,
        leg_uris={
            leg: leg_uri
            for leg, leg_uri in (
                (DENSE_FIELD, settings.dense_uri),
                (SPARSE_FIELD, settings.sparse_uri),
            )
            if leg_uri
        },
    )
