"""A document's links to other documents of its tenant: the values and their rules.

A link names its target by external id, has a type (a free string: ``link`` for a
hyperlink, ``mention`` for a title named in the text, or whatever a client's data
calls its relations) and a weight (1 unless given). A link may name a document not yet
ingested: it is kept, and resolves when that document arrives; deleting a document
leaves the links to it unresolved (they resolve again if it comes back) and removes its
own (:mod:`hsearch.ingestion.derived.links`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from hsearch.errors import FieldError

__all__ = [
    "DEFAULT_LINK_TYPE",
    "MAX_LINKS",
    "MAX_LINK_TYPE_LENGTH",
    "MAX_LINK_WEIGHT",
    "Link",
    "LinkOrigin",
    "LinkedPage",
    "TextLinks",
    "link_problems",
    "links_from_json",
    "merged",
]

DEFAULT_LINK_TYPE = "link"
MAX_LINKS = 1000
"""Links one document may carry (given and found in its text, each)."""
MAX_LINK_TYPE_LENGTH = 64
MAX_TARGET_LENGTH = 512
MAX_LINK_WEIGHT = 1000.0


class LinkOrigin(StrEnum):
    GIVEN = "given"
    """Submitted with the document, or set by ``PATCH``."""
    TEXT = "text"
    """Found in the document's text (:mod:`hsearch.graph.extract`)."""


class TextLinks(StrEnum):
    """Which links to find in a document's text."""

    HYPERLINKS = "hyperlinks"
    """Markdown and HTML hyperlinks and ``[[wiki links]]``, resolved to documents by
    external id, path or title (type ``link``)."""
    MENTIONS = "mentions"
    """Other documents' titles named in the text (type ``mention``)."""


@dataclass(frozen=True, slots=True)
class Link:
    target: str
    """The linked document's external id."""
    type: str = DEFAULT_LINK_TYPE
    weight: float = 1.0

    def as_json(self) -> dict[str, Any]:
        return {"target": self.target, "type": self.type, "weight": self.weight}


@dataclass(frozen=True, slots=True)
class LinkedPage:
    """A document a search hit links to (``out``) or from (``in``), by a link of
    ``type`` (``include_linked``)."""

    external_id: str
    title: str
    type: str
    direction: str


def link_problems(
    links: Sequence[Link], *, field: str = "links", source: str | None = None
) -> Iterator[FieldError]:
    """What is wrong with a document's ``links``, each naming its field
    (``links[3].weight``); ``source``: the document's own external id (a document does
    not link to itself)."""
    if len(links) > MAX_LINKS:
        msg = f"{len(links)} links: a document carries at most {MAX_LINKS}"
        yield FieldError(field=field, message=msg)
        return
    for i, link in enumerate(links):
        at = f"{field}[{i}]"
        if not link.target or len(link.target) > MAX_TARGET_LENGTH:
            msg = f"the target is an external id of 1 to {MAX_TARGET_LENGTH} characters"
            yield FieldError(field=f"{at}.target", message=msg)
        elif source is not None and link.target == source:
            msg = f"{source!r} links to itself: a link names another document"
            yield FieldError(field=f"{at}.target", message=msg)
        if not link.type or len(link.type) > MAX_LINK_TYPE_LENGTH or not link.type.strip():
            msg = f"the type is a name of 1 to {MAX_LINK_TYPE_LENGTH} characters"
            yield FieldError(field=f"{at}.type", message=msg)
        if not math.isfinite(link.weight) or not 0 < link.weight <= MAX_LINK_WEIGHT:
            msg = f"the weight is a number above 0 and at most {MAX_LINK_WEIGHT:g}"
            yield FieldError(field=f"{at}.weight", message=msg)


def merged(links: Iterable[Link]) -> tuple[Link, ...]:
    """``links`` with a (target, type) pair given twice kept once, with its largest
    weight, in the order of first appearance."""
    kept: dict[tuple[str, str], Link] = {}
    for link in links:
        key = (link.target, link.type)
        held = kept.get(key)
        if held is None or link.weight > held.weight:
            kept[key] = link if held is None else Link(link.target, link.type, link.weight)
    return tuple(kept.values())


def links_from_json(rows: Sequence[Mapping[str, Any]] | None) -> tuple[Link, ...]:
    """Links as :meth:`Link.as_json` stored them."""
    return tuple(
        Link(str(r["target"]), str(r.get("type", DEFAULT_LINK_TYPE)), float(r.get("weight", 1.0)))
        for r in rows or ()
    )
