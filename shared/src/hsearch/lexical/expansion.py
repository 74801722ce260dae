"""Reads each tenant's lexicon (vocabulary and synonyms) for the additions of
:mod:`hsearch.lexical.additions`: once per data generation of the tenant (a write, or new
synonyms, changes it), the vocabulary at most every :data:`VOCABULARY_REFRESH_S`, for
:data:`TENANTS_KEPT` tenants.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from cachetools import LRUCache

from hsearch.db.engine import DATABASE_UNAVAILABLE, SessionFactory, unavailable
from hsearch.db.repositories.lexical import VocabularyRepository
from hsearch.db.repositories.synonyms import SynonymRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.lexical.additions import TenantLexicon
from hsearch.lexical.synonyms import Synonyms
from hsearch.lexical.typos import Vocabulary

__all__ = ["TENANTS_KEPT", "VOCABULARY_REFRESH_S", "QueryExpander"]

TENANTS_KEPT: Final = 64
VOCABULARY_REFRESH_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class _Kept:
    version: str
    lexicon: TenantLexicon
    words_read_at: float


class QueryExpander:
    """Reads tenants' lexicons (vocabulary, synonyms) for :func:`expand_query`: again
    when the tenant's data generation changed, the vocabulary at most every
    ``refresh_s`` (a tenant being written to changes its generation with every commit,
    and reading 100,000 words takes a tenth of a second; a new word is matched within
    ``refresh_s``). Synonyms are read with every change (one row): new rules apply to
    the next search."""

    def __init__(
        self,
        sessions: SessionFactory,
        *,
        refresh_s: float = VOCABULARY_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions = sessions
        self._refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: LRUCache[str, _Kept] = LRUCache(maxsize=TENANTS_KEPT)

    def lexicon(self, tenant_id: str) -> TenantLexicon:
        """The tenant's lexicon as its data stands (blocking: run it off the loop).

        Raises:
            MetadataUnavailableError: the database is down and nothing was read yet.
        """
        with self._lock:
            kept = self._kept.get(tenant_id)
        try:
            with self._sessions() as session:
                version = TenantRepository(session).data_version(tenant_id)
                if kept is not None and kept.version == version:
                    return kept.lexicon
                now = self._clock()
                synonyms = Synonyms(SynonymRepository(session).get(tenant_id))
                if kept is not None and now - kept.words_read_at < self._refresh_s:
                    vocabulary, read_at = kept.lexicon.vocabulary, kept.words_read_at
                else:
                    words = VocabularyRepository(session).words(tenant_id)
                    vocabulary, read_at = Vocabulary(words), now
        except DATABASE_UNAVAILABLE as exc:
            if kept is not None:
                return kept.lexicon
            raise unavailable(exc) from exc
        lexicon = TenantLexicon(vocabulary, synonyms)
        with self._lock:
            self._kept[tenant_id] = _Kept(version, lexicon, read_at)
        return lexicon
