"""The registered kinds of derived data, and the steps the maintainers call on them
all (:mod:`hsearch.ingestion.derived.protocol`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from hsearch.concepts.extract import ConceptExtractor
from hsearch.config import ConceptSettings
from hsearch.db.engine import Session, SessionFactory
from hsearch.embedding.protocol import EncoderInfo, SparseKind
from hsearch.ingestion.derived.chunks import StoredChunks
from hsearch.ingestion.derived.concepts import ChunkTexts, ConceptsKind
from hsearch.ingestion.derived.lexical import LexicalStatisticsKind, VocabularyKind
from hsearch.ingestion.derived.links import LinksKind
from hsearch.ingestion.derived.protocol import (
    DerivedKind,
    DerivedRebuild,
    DerivedWriter,
    KindDrift,
    RebuildContext,
    Removal,
    Repair,
    WriteUnit,
)
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["DerivedKinds", "standard_kinds"]


class DerivedKinds:
    """The kinds of data derived from documents, in the order they are called."""

    def __init__(self, kinds: Iterable[DerivedKind]) -> None:
        self._kinds = tuple(kinds)
        names = [k.name for k in self._kinds]
        if len(set(names)) != len(names):
            msg = f"derived kinds need distinct names, got {names}"
            raise ValueError(msg)

    def __iter__(self) -> Iterator[DerivedKind]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self._kinds)

    def including(self, kinds: Sequence[DerivedKind]) -> DerivedKinds:
        """These kinds and ``kinds`` after them."""
        return DerivedKinds([*self._kinds, *kinds]) if kinds else self

    def writers(self, unit: WriteUnit) -> list[DerivedWriter]:
        """Every kind's writer for one of the indexer's transactions."""
        return [k.writer(unit) for k in self._kinds]

    def remove(self, session: Session, removal: Removal) -> None:
        """What every kind derived from ``removal``'s documents, removed in ``session``."""
        if removal.documents or removal.attempts:
            for kind in self._kinds:
                kind.remove(session, removal)

    def sweep_tenant(self, tenant_id: str) -> None:
        """What every kind keeps of the tenant outside the database, removed."""
        for kind in self._kinds:
            kind.sweep(tenant_id)

    def purge_tenant(self, session: Session, tenant_id: str) -> dict[str, int]:
        """Every kind's rows of the tenant deleted in ``session``; rows by table."""
        rows: dict[str, int] = {}
        for kind in self._kinds:
            rows.update(kind.purge(session, tenant_id))
        return rows

    def rebuilds(self, context: RebuildContext) -> list[DerivedRebuild]:
        """Every kind's rebuild."""
        return [k.rebuild(context) for k in self._kinds]

    def check(self, sessions: SessionFactory, tenant_id: str) -> tuple[KindDrift, ...]:
        """Every kind's drift for the tenant."""
        return tuple(k.check(sessions, tenant_id) for k in self._kinds)

    def repair(self, sessions: SessionFactory, drifts: Sequence[KindDrift]) -> Repair:
        """Every drift that is not clean repaired by its kind; what is left to the
        caller, together."""
        by_name = {k.name: k for k in self._kinds}
        resubmit: set[str] = set()
        changed = False
        for drift in drifts:
            if drift.clean:
                continue
            done = by_name[drift.kind].repair(sessions, drift)
            resubmit.update(done.resubmit)
            changed |= done.changed
        return Repair(resubmit=tuple(sorted(resubmit)), changed=changed)


def standard_kinds(
    *,
    store: VectorStore,
    statistics: LexicalStatistics,
    encoder: EncoderInfo | None = None,
    concepts: ConceptSettings | None = None,
    chunk_texts: ChunkTexts | None = None,
) -> DerivedKinds:
    """What every deployment derives from a document, in order: the tenant's BM25
    statistics (they weigh the chunks' term counts), its vocabulary for typo tolerance,
    the chunks in ``store``, the chunks' concepts (unless ``concepts.enabled`` is off;
    ``None``: the defaults), and the documents' links. ``encoder``: the configured
    encoder, whose sparse side says whether the statistics are kept (``None``: term
    counts, as the offline and fake encoders have); ``chunk_texts``: how the indexer
    cuts a text now, for reconcile to extract missing concepts without indexing the
    document again."""
    term_counts = encoder is None or encoder.sparse_kind is SparseKind.TERM_FREQUENCY
    concepts = concepts or ConceptSettings()
    kinds: list[DerivedKind] = [
        LexicalStatisticsKind(statistics, term_counts=term_counts),
        VocabularyKind(),
        StoredChunks(store),
    ]
    if concepts.enabled:
        extractor = ConceptExtractor(
            max_per_text=concepts.max_per_chunk, batch_size=concepts.batch_size
        )
        kinds.append(ConceptsKind(extractor, chunk_texts=chunk_texts))
    kinds.append(LinksKind())
    return DerivedKinds(kinds)
