from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
from sqlalchemy import Insert, TextClause, delete, select, text
from sqlalchemy import insert as insert_into
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from hsearch.db.models import LexicalCorpusStats, LexicalTermStats, LexicalVocabulary


@dataclass(frozen=True, slots=True)
class TermDeltas:
    """Changes to a tenant's term document frequencies: term ids in increasing order
    (the order their rows are locked in, which avoids deadlocks between workers), each
    with its change, none zero."""

    terms: npt.NDArray[np.int64]
    deltas: npt.NDArray[np.int64]

    @classmethod
    def of(cls, deltas: Mapping[int, int]) -> TermDeltas:
        """The changes ``{term id: change}`` (zeros left out)."""
        return cls.summed([deltas])

    @classmethod
    def summed(
        cls, added: Sequence[Mapping[int, int]], removed: Sequence[Mapping[int, int]] = ()
    ) -> TermDeltas:
        """The sum of the documents' ``{term id: chunks}`` in ``added`` less those in
        ``removed``. With numpy: a unit of 256 short documents holds about 12,000 such
        counts, which a :class:`~collections.Counter`, then a sort of the (term,
        change) pairs took 8.5 ms to sum and order, against 1.6
        (docs/history/ingest-throughput.md, `f919f4b`: term changes summed with numpy)."""
        parts = [*added, *removed]
        if not any(parts):
            return cls(np.empty(0, np.int64), np.empty(0, np.int64))
        terms = np.fromiter(chain.from_iterable(parts), np.int64)
        counts = np.fromiter(chain.from_iterable(p.values() for p in parts), np.int64)
        if removed:
            counts[sum(len(a) for a in added) :] *= -1
        unique, where = np.unique(terms, return_inverse=True)
        sums = np.zeros(len(unique), np.int64)
        np.add.at(sums, where, counts)
        kept = sums != 0
        return cls(unique[kept], sums[kept])

    def __len__(self) -> int:
        return len(self.terms)

    def as_dict(self) -> dict[int, int]:
        return dict(zip(self.terms.tolist(), self.deltas.tolist(), strict=True))


class LexicalStatsRepository:
    """Per-tenant BM25 statistics: chunk count, total length, term document frequency."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def corpus(self, tenant_id: str) -> tuple[int, int]:
        """``(chunk_count, total_length)`` of the tenant's indexed chunks, as the
        database has them now (its upserts bypass the session's copy of the row)."""
        row = self._session.get(LexicalCorpusStats, tenant_id, populate_existing=True)
        return (row.chunk_count, row.total_length) if row else (0, 0)

    def document_frequencies(self, tenant_id: str, term_ids: Iterable[int]) -> dict[int, int]:
        ids = sorted(set(term_ids))
        if not ids:
            return {}
        rows = self._session.execute(
            select(LexicalTermStats.term_id, LexicalTermStats.df).where(
                LexicalTermStats.tenant_id == tenant_id,
                LexicalTermStats.term_id.in_(ids),
                LexicalTermStats.df > 0,
            )
        )
        return {int(t): int(df) for t, df in rows}

    def apply_delta(
        self,
        tenant_id: str,
        *,
        chunks: int,
        length: int,
        term_deltas: TermDeltas,
    ) -> None:
        """Add (or with negative numbers, remove) documents' contributions."""
        dialect = self._session.get_bind().dialect.name
        corpus, terms = _upserts(dialect)
        self._session.execute(
            corpus,
            {"tenant_id": tenant_id, "encoder": "", "chunk_count": chunks, "total_length": length},
        )
        if len(term_deltas):
            self._session.execute(terms, _term_rows(dialect, tenant_id, term_deltas))
        if len(term_deltas) and term_deltas.deltas.min() < 0:
            self._session.execute(
                delete(LexicalTermStats).where(
                    LexicalTermStats.tenant_id == tenant_id, LexicalTermStats.df <= 0
                )
            )
        self._session.flush()

    def replace_all(self, corpora: Mapping[str, tuple[int, int, Mapping[int, int]]]) -> None:
        """Replace every tenant's statistics by ``corpora``: per tenant, ``(chunk count,
        total length, document frequency per term)``; tenants left out have none after.
        One statement per table and batch (a rebuild writes millions of rows)."""
        self._session.execute(delete(LexicalTermStats))
        self._session.execute(delete(LexicalCorpusStats))
        if corpora:
            self._session.execute(
                insert_into(LexicalCorpusStats),
                [
                    {"tenant_id": t, "encoder": "", "chunk_count": n, "total_length": length}
                    for t, (n, length, _) in sorted(corpora.items())
                ],
            )
        rows = [
            {"tenant_id": t, "term_id": term, "df": df}
            for t, (_, _, dfs) in sorted(corpora.items())
            for term, df in sorted(dfs.items())
            if df > 0
        ]
        for start in range(0, len(rows), 5000):
            self._session.execute(insert_into(LexicalTermStats), rows[start : start + 5000])
        self._session.flush()

    def all_document_frequencies(self, tenant_id: str) -> dict[int, int]:
        """Every term's document frequency in the tenant's statistics (those above 0)."""
        rows = self._session.execute(
            select(LexicalTermStats.term_id, LexicalTermStats.df).where(
                LexicalTermStats.tenant_id == tenant_id, LexicalTermStats.df > 0
            )
        )
        return {int(t): int(df) for t, df in rows}

    def replace_tenant(
        self,
        tenant_id: str,
        *,
        chunks: int,
        length: int,
        document_frequencies: Mapping[int, int],
    ) -> None:
        """Replace the tenant's statistics by these (reconcile's repair)."""
        self.purge_tenant(tenant_id)
        self._session.execute(
            insert_into(LexicalCorpusStats),
            [
                {
                    "tenant_id": tenant_id,
                    "encoder": "",
                    "chunk_count": chunks,
                    "total_length": length,
                }
            ],
        )
        rows = [
            {"tenant_id": tenant_id, "term_id": term, "df": df}
            for term, df in sorted(document_frequencies.items())
            if df > 0
        ]
        for start in range(0, len(rows), 5000):
            self._session.execute(insert_into(LexicalTermStats), rows[start : start + 5000])
        self._session.flush()

    def purge_tenant(self, tenant_id: str) -> dict[str, int]:
        """Delete the tenant's statistics; rows deleted, by table."""
        statements = {
            "lexical_term_stats": delete(LexicalTermStats).where(
                LexicalTermStats.tenant_id == tenant_id
            ),
            "lexical_corpus_stats": delete(LexicalCorpusStats).where(
                LexicalCorpusStats.tenant_id == tenant_id
            ),
        }
        return {
            # A DML statement's result is a CursorResult, which has a rowcount.
            table: int(self._session.execute(stmt).rowcount or 0)  # type: ignore[attr-defined]
            for table, stmt in statements.items()
        }


class VocabularyRepository:
    """The words of a tenant's indexed text (:mod:`hsearch.lexical.typos`)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, tenant_id: str, words: Iterable[str]) -> None:
        """List ``words`` for the tenant (those listed already stay as they are). One
        statement, the words as one parameter, as the term statistics are written."""
        ordered = sorted(set(words))
        if not ordered:
            return
        dialect = self._session.get_bind().dialect.name
        if dialect == "postgresql":
            statement = text(
                "INSERT INTO lexical_vocabulary (tenant_id, word) "
                "SELECT :tenant_id, w FROM unnest(CAST(:words AS VARCHAR[])) AS t(w) "
                "ON CONFLICT DO NOTHING"
            )
            self._session.execute(statement, {"tenant_id": tenant_id, "words": ordered})
        else:
            statement = text(
                "INSERT INTO lexical_vocabulary (tenant_id, word) "
                "SELECT :tenant_id, value FROM json_each(:words) WHERE true "
                "ON CONFLICT DO NOTHING"
            )
            self._session.execute(
                statement, {"tenant_id": tenant_id, "words": orjson.dumps(ordered).decode()}
            )

    def words(self, tenant_id: str) -> list[str]:
        """Every word listed for the tenant."""
        return list(
            self._session.scalars(
                select(LexicalVocabulary.word).where(LexicalVocabulary.tenant_id == tenant_id)
            )
        )

    def clear(self) -> None:
        """Every tenant's words out (a rebuild lists them again)."""
        self._session.execute(delete(LexicalVocabulary))

    def purge_tenant(self, tenant_id: str) -> dict[str, int]:
        """Delete the tenant's words; rows deleted, by table."""
        result = self._session.execute(
            delete(LexicalVocabulary).where(LexicalVocabulary.tenant_id == tenant_id)
        )
        # A DML statement's result is a CursorResult, which has a rowcount.
        return {"lexical_vocabulary": int(result.rowcount or 0)}  # type: ignore[attr-defined]


@lru_cache(maxsize=4)
def _upserts(dialect: str) -> tuple[Insert, TextClause]:
    """The two statements :meth:`LexicalStatsRepository.apply_delta` runs, built once per
    dialect and executed with parameters, so each is compiled once (cached): building
    them (their ``excluded`` alias) and compiling a multi-row ``VALUES`` clause anew for
    every document took about 45 % of the indexer's CPU time per chunk
    (docs/history/ingest-throughput.md, `e9769d9`).

    The term rows (hundreds per group of documents) go to the database as one parameter,
    unpacked by the database: a JSON array read with ``json_each`` (SQLite), two arrays
    read with ``unnest`` (Postgres). One statement and one round trip instead of one
    parameter set per term (executemany) bound in Python: on SQLite, 2,000 terms took
    11 ms with the commit instead of 14. The rest is the database's own work: term ids
    are hashes, so a group's terms touch rows all over the table."""
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    corpus = insert(LexicalCorpusStats)
    corpus = corpus.on_conflict_do_update(
        index_elements=[LexicalCorpusStats.tenant_id],
        set_={
            "chunk_count": LexicalCorpusStats.chunk_count + corpus.excluded.chunk_count,
            "total_length": LexicalCorpusStats.total_length + corpus.excluded.total_length,
        },
    )
    table = LexicalTermStats.__tablename__
    if dialect == "postgresql":
        rows = (
            "SELECT :tenant_id, t.term_id, t.df FROM unnest("
            "CAST(:term_ids AS BIGINT[]), CAST(:deltas AS BIGINT[])) AS t(term_id, df)"
        )
    else:
        # WHERE true: SQLite's parser needs it between a SELECT and ON CONFLICT.
        rows = (
            "SELECT :tenant_id, json_extract(value, '$[0]'), json_extract(value, '$[1]') "
            "FROM json_each(:rows) WHERE true"
        )
    terms = text(
        f"INSERT INTO {table} (tenant_id, term_id, df) {rows} "
        f"ON CONFLICT (tenant_id, term_id) DO UPDATE SET df = {table}.df + excluded.df"
    )
    return corpus, terms


def _term_rows(dialect: str, tenant_id: str, changed: TermDeltas) -> dict[str, Any]:
    """The term upsert's parameters for ``changed``: two arrays (Postgres), or one JSON
    array of ``[term, change]`` pairs (SQLite)."""
    if dialect == "postgresql":
        return {
            "tenant_id": tenant_id,
            "term_ids": changed.terms.tolist(),
            "deltas": changed.deltas.tolist(),
        }
    pairs = np.column_stack((changed.terms, changed.deltas))
    return {
        "tenant_id": tenant_id,
        "rows": orjson.dumps(pairs, option=orjson.OPT_SERIALIZE_NUMPY).decode(),
    }
