"""Process-wide resources built from settings, shared by the API and the workers."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import Settings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.embedding.factory import create_embedder
from hsearch.embedding.protocol import Embedder
from hsearch.rerank.factory import create_reranker
from hsearch.rerank.protocol import Reranker
from hsearch.vectorstore.factory import create_vector_store
from hsearch.vectorstore.milvus import MilvusVectorStore

logger = logging.getLogger(__name__)


@dataclass
class Resources:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    embedder: Embedder
    store: MilvusVectorStore
    reranker: Reranker | None = None

    def close(self) -> None:
        self.store.close()
        self.engine.dispose()


def build_resources(settings: Settings, *, with_reranker: bool = False) -> Resources:
    """Connect to the metadata database and Milvus, load the encoder and make sure the
    collection exists and was built with that encoder."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_db_engine(
        settings.database_url, pool_size=settings.database.pool_size, echo=settings.database.echo
    )
    embedder = create_embedder(settings.encoder)
    store = create_vector_store(settings.milvus, uri=settings.milvus_uri)
    store.ensure_collection(embedder.info)
    reranker = (
        create_reranker(
            settings.rerank.model_path,
            device=settings.encoder.device,
            batch_size=settings.rerank.batch_size,
            max_length=settings.rerank.max_length,
        )
        if with_reranker
        else None
    )
    return Resources(
        settings=settings,
        engine=engine,
        sessions=create_session_factory(engine),
        embedder=embedder,
        store=store,
        reranker=reranker,
    )
