"""A document's chunks' concepts (:mod:`hsearch.concepts.extract`), kept on its row:
``documents.concepts`` = ``{"v": extractor version, "chunks": [[concept, ...], ...]}``,
aligned with ``chunk_ids``. Tenants' concept graphs and communities are built from them
in memory (:mod:`hsearch.concepts.store`), at the tenant's data version, which every
write moves.

* **indexing** extracts the concepts of the chunks of a transaction's group at once
  (``nlp.pipe`` batches, grouped by language) and sets the column with the row;
* **deletion** and **tenant purge**: nothing more, the concepts go with the row;
* **reindex** extracts them again for the chunks of the new collection (the chunker may
  cut otherwise): while the documents are re-encoded, outside any transaction, then set
  on the rows in the switching transaction;
* **reconcile** finds indexed documents whose concepts are missing (indexed before the
  column existed, or while extraction was off) or of another extractor version (an
  older extraction, or the lexical fallback), and extracts them again from the
  document's chunks as the chunker cuts them now when their ids are the row's (the
  same texts); otherwise it submits the document to be indexed again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hsearch.concepts.extract import ConceptExtractor, primary_language
from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.errors import ConfigurationError
from hsearch.ingestion.derived.protocol import (
    DerivedDocument,
    KindDrift,
    RebuildContext,
    Removal,
    Repair,
    WriteUnit,
)
from hsearch.ingestion.ids import chunk_id

__all__ = ["ChunkTexts", "ConceptsDrift", "ConceptsKind", "concepts_of"]

logger = logging.getLogger(__name__)

ChunkTexts = Callable[[str, str, str], Sequence[str]]
"""A document's chunks' texts as the indexer cuts them now, from its ``(content, title,
lang)``."""

_REPAIR_PAGE = 64


def concepts_of(
    extractor: ConceptExtractor, documents: Sequence[tuple[str, str, Sequence[str]]]
) -> list[dict[str, Any]]:
    """The column's value for each ``(lang, content, chunk texts)``: every text of one
    language in one extraction (``nlp.pipe`` batches)."""
    by_pipeline: dict[str, list[int]] = {}
    for i, (lang, content, _) in enumerate(documents):
        by_pipeline.setdefault(extractor.language(lang, content), []).append(i)
    found: dict[int, list[list[str]]] = {}
    for which, positions in by_pipeline.items():
        texts = [text for i in positions for text in documents[i][2]]
        concepts = extractor.extract(texts, lang=which)
        at = 0
        for i in positions:
            n = len(documents[i][2])
            found[i] = [list(c) for c in concepts[at : at + n]]
            at += n
    return [
        {"v": extractor.version(extractor.language(lang, content)), "chunks": found[i]}
        for i, (lang, content, _) in enumerate(documents)
    ]


@dataclass(frozen=True, slots=True)
class ConceptsDrift:
    tenant_id: str
    stale: tuple[uuid.UUID, ...]
    """Documents whose concepts are missing or of another extractor version."""
    kind: str = "concepts"

    @property
    def clean(self) -> bool:
        return not self.stale

    def figures(self) -> dict[str, object]:
        return {"documents_without_current_concepts": len(self.stale)}


class ConceptsKind:
    """The chunks' concepts (module docstring). ``chunk_texts``: how reconcile cuts a
    document's text into the chunks it extracts again (``None``: it submits the
    documents to be indexed again)."""

    name = "concepts"

    def __init__(
        self, extractor: ConceptExtractor, *, chunk_texts: ChunkTexts | None = None
    ) -> None:
        self._extractor = extractor
        self._chunk_texts = chunk_texts

    def writer(self, unit: WriteUnit) -> _ConceptsWriter:
        return _ConceptsWriter(self._extractor)

    def remove(self, session: Session, removal: Removal) -> None:
        pass  # the concepts go with the row

    def sweep(self, tenant_id: str) -> None:
        pass  # only rows

    def purge(self, session: Session, tenant_id: str) -> Mapping[str, int]:
        return {}  # the documents' rows are the purge's own

    def rebuild(self, context: RebuildContext) -> _ConceptsRebuild:
        return _ConceptsRebuild(self._extractor)

    def check(self, sessions: SessionFactory, tenant_id: str) -> ConceptsDrift:
        expected: dict[str, frozenset[str]] = {}
        stale: list[uuid.UUID] = []
        with sessions() as session:
            for row in DocumentRepository(session).concept_sources(tenant_id, versions_only=True):
                lang = primary_language(row.lang)
                if lang not in expected:
                    # Untagged: the text decides the pipeline, either version will do.
                    langs = [lang] if lang else ["en", "ja"]
                    expected[lang] = frozenset(
                        self._extractor.version(self._extractor.language(x)) for x in langs
                    )
                if row.concepts is None or row.concepts.get("v") not in expected[lang]:
                    stale.append(row.id)
        return ConceptsDrift(tenant_id=tenant_id, stale=tuple(stale))

    def repair(self, sessions: SessionFactory, drift: KindDrift) -> Repair:
        """The concepts of the drift's documents extracted again (module docstring)."""
        if not isinstance(drift, ConceptsDrift):
            raise TypeError(f"not a drift of the concepts: {drift!r}")
        resubmit: list[str] = []
        repaired = 0
        for start in range(0, len(drift.stale), _REPAIR_PAGE):
            ids = drift.stale[start : start + _REPAIR_PAGE]
            with transaction(sessions) as session:
                rows = DocumentRepository(session).get_many(set(ids), for_update=True)
                ready: list[tuple[Any, Sequence[str]]] = []
                for doc in rows.values():
                    texts = self._cut(doc.content, doc.title, doc.lang)
                    cut = (
                        None
                        if texts is None
                        else [chunk_id(doc.id, i, t) for i, t in enumerate(texts)]
                    )
                    if texts is None or cut != list(doc.chunk_ids or ()):
                        resubmit.append(doc.external_id)
                    else:
                        ready.append((doc, texts))
                values = concepts_of(
                    self._extractor, [(doc.lang, doc.content, texts) for doc, texts in ready]
                )
                for (doc, _), value in zip(ready, values, strict=True):
                    doc.concepts = value
                repaired += len(ready)
        logger.warning(
            "reconcile.concepts_repaired tenant=%s extracted=%d resubmitted=%d",
            drift.tenant_id,
            repaired,
            len(resubmit),
        )
        return Repair(resubmit=tuple(sorted(resubmit)), changed=repaired > 0)

    def _cut(self, content: str, title: str, lang: str) -> Sequence[str] | None:
        """The chunks' texts as the indexer cuts them now; ``None`` when this process
        cannot cut (no chunker, or an encoder it did not load): resubmitted then."""
        if self._chunk_texts is None:
            return None
        try:
            return self._chunk_texts(content, title, lang)
        except ConfigurationError as exc:
            logger.info("reconcile.concepts_cannot_chunk error=%s", exc)
            self._chunk_texts = None
            return None


class _ConceptsWriter:
    """Each group's documents' concepts extracted at once and set on their rows."""

    def __init__(self, extractor: ConceptExtractor) -> None:
        self._extractor = extractor

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        values = concepts_of(
            self._extractor, [(doc.lang, doc.content, doc.chunks) for doc in documents]
        )
        for doc, value in zip(documents, values, strict=True):
            doc.columns["concepts"] = value

    def finish(self, session: Session) -> None:
        pass

    def wait(self) -> BaseException | None:
        return None


class _ConceptsRebuild:
    """The concepts of the rebuilt chunks, extracted as the documents are re-encoded (no
    transaction open) and set on the rows when they are recounted."""

    def __init__(self, extractor: ConceptExtractor) -> None:
        self._extractor = extractor
        self._found: dict[uuid.UUID, tuple[tuple[str, ...], dict[str, Any]]] = {}

    def add(self, documents: Sequence[DerivedDocument]) -> None:
        values = concepts_of(
            self._extractor, [(doc.lang, doc.content, doc.chunks) for doc in documents]
        )
        for doc, value in zip(documents, values, strict=True):
            self._found[doc.document_id] = (tuple(doc.chunk_ids), value)

    def recount(self, document: DerivedDocument) -> None:
        held = self._found.pop(document.document_id, None)
        if held is not None and held[0] == tuple(document.chunk_ids):
            value = held[1]
        else:  # not seen while filling (cannot happen: the switch checks nothing changed)
            (value,) = concepts_of(
                self._extractor, [(document.lang, document.content, document.chunks)]
            )
        document.columns["concepts"] = value

    def commit(self, session: Session) -> None:
        self._found.clear()
