"""Links found in a document's text: hyperlinks resolved to documents, and title mentions.

Pure: no I/O, no settings. The caller hands in the text, the tenant's document names and
titles, and which kinds to look for; :func:`find_links` returns typed links to other
documents by external id.

Hyperlinks (:func:`hyperlink_targets`)
--------------------------------------
Every Markdown inline link ``[label](target "title")`` and reference definition
``[id]: target``, autolink ``<https://...>``, HTML ``<a href="...">`` and wiki link
``[[Target]]``, ``[[Target|label]]``, ``[[Target#section]]``, in order of appearance,
each with its target as written (backslash escapes and entities decoded, no percent
encoding added) and its :class:`LinkForm`.

* Markdown is read by markdown-it-py (CommonMark), so links in fenced code and code
  spans are no links, escapes and entities follow the spec, and images (``![alt](x)``)
  are told apart from links. A reference use (``[label][id]``, ``[id]``) is not
  reported: its target is its definition's, reported once where it is defined (the
  first definition of a label, as CommonMark reads it).
* Indented code blocks are switched off: most documents here are plain text, where an
  indented paragraph is a paragraph, and reading it as code would hide its links.
* Wiki links are an inline rule of that parser (so code spans hide them too); their
  target and label cannot hold brackets, a backtick or a line break. An embed
  (``![[picture.png]]``) is no link, as an image is not.
* HTML, inline or a block, is read by lxml (libxml2): every quoting of ``href``,
  entities decoded, comments and ``<script>`` / ``<style>`` contents skipped. Not the
  standard library's ``html.parser``: its time grows with the square of some malformed
  inputs (200 KB of ``<a href="`` took 79 s), where libxml2 takes milliseconds for a
  megabyte. libxml2 stops nesting at 256 levels: a link inside deeper elements is lost.

Cost: linear in the text (``python -m bench.graph_extract`` doubles the size of inputs
built to be slow and times them). markdown-it-py is pure Python: about 1.5 s for a
megabyte of prose with links, and 10 to 25 s for a megabyte made of brackets, where each
``[`` tries the link rules on what follows. A text without ``<`` and without one of
``[`` and ``]`` can hold no link and is not parsed.

Resolution (:class:`DocumentNames`)
-----------------------------------
A target names a document by external id, by path or by title; the first step that
finds one wins:

1. the target is an external id, exactly (a wiki link tries this after its titles);
2. the target as a path: a URL (``http``, ``https``, ``//host``) loses its scheme and
   host (only those of ``hosts`` when given), ``file:`` its scheme; any other scheme
   (``mailto:``, ``tel:``) names no document. The query and fragment are dropped, the
   path is percent-decoded, ``./`` and ``..`` folded, the leading ``/`` dropped. A
   relative path is tried first against the linking document's folder (its external
   id read as a path: ``guide/setup.md`` links ``./intro.md`` as ``guide/intro.md``),
   then from the root (a target that is itself an external id took step 1). Each is
   matched against the external ids read the same way (a URL id by its path), first
   as it is, then with a file extension (``.md``, ``.markdown``, ``.mdx``, ``.html``,
   ``.htm``, ``.txt``, ``.rst``) and an ``index`` or ``README`` file name dropped on
   both sides (``guide/`` = ``guide/index.md`` = ``guide.html``). An empty path (a
   site's root) names no document: every external home page would otherwise land on
   the tenant's ``index.md``;
3. by title, case-insensitive with runs of whitespace read as one space: a relative
   path, percent-decoded, with and without its file extension (``Getting%20Started.md``
   names "Getting Started"). A wiki link names a title, so it tries this first, also
   with ``_`` read as a space (``[[New_York]]``), then its target as an id and a path.

A document's ``source`` is not read: here it names a collection (``hsearch ingest``
sets it to the folder's name), not a document's path, which is its external id.

Ambiguity: where one name (a title, a path without its extension) belongs to several
documents, the target is the one with the smallest external id (Python's string
order), so the answer never depends on the order documents were listed or ingested. A
hyperlink names one document; mentions (below) go to every holder of a title instead.

Title mentions (:class:`TitleMentions`)
---------------------------------------
A text mentions a document when the document's title, without a trailing
parenthesised qualifier ("Glory (1989 film)" is found as "glory"), at least
``min_length`` (4) characters long, occurs in it, case-insensitive, runs of whitespace
read as one space. Occurrences are taken leftmost first, the longest title at each
place, without overlap: "South Africa" in a text does not also mention "Africa", and
a document whose own title contains another's ("Body water", "Water") does not
mention the other where it names itself. A document never mentions itself; a title
held by several documents mentions each of them. Titles are found in one pass of an
Aho-Corasick automaton (pyahocorasick), so the cost grows with the text and the
occurrences, not with the number of titles. Occurrences overlap only where titles end
with other titles ("New York", "York"); a tenant whose titles are "aaaa", "aaaaa", ...
(56 of them) makes a megabyte of "a" cost tens of seconds, its own worker's time.

:class:`MentionRule` chooses the matching: ``whole_words=False`` is the rule that
derived the links of the MuSiQue sample (``shared/datasets/en-musique-train-100``,
``edges.tsv``): it reproduces all 2,594 of them, and no other. ``whole_words=True``, the
default, also asks that an occurrence neither starts nor ends inside a word (a word
is letters, digits and ``_``; scripts written without spaces, CJK, kana, Hangul, Thai
and their neighbours, have no word edges to check). Measured against those 2,594 edges
over the sample's 1,890 passages:

=====================  =========  ======  =====
rule                   precision  recall  links
=====================  =========  ======  =====
substring (MuSiQue)    1.000      1.000   2,594
whole words            1.000      0.781   2,026
=====================  =========  ======  =====

Whole words keeps a subset here, hence its precision. Of the 568 links it drops, a
random 40 read by hand: 34 are a title inside another word ("Euro" in "European" and
"Europe", "Time" in "sometimes", "Paris" in "parish", "Water" in "waterfall", "Kansas"
in "Arkansas", "Four" in "fourth"), 6 a derived word that does name the titled thing
("Nigerian", "South Korean", "African"). Noise outweighs the loss for a real
collection's graph, so the product's default is whole words; the substring rule stays
for reproducing the MuSiQue graph.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any, Final
from urllib.parse import SplitResult, unquote, urlsplit

import ahocorasick
import lxml.etree
from markdown_it import MarkdownIt
from markdown_it.rules_inline.link import link as _commonmark_link
from markdown_it.rules_inline.state_inline import StateInline
from markdown_it.token import Token

from hsearch.graph.links import TextLinks

LINK_TYPE: Final = "link"
"""The type of a link that a hyperlink or a wiki link makes."""
MENTION_TYPE: Final = "mention"
"""The type of a link that a title mention makes."""


class LinkForm(StrEnum):
    """How a hyperlink was written."""

    INLINE = "inline"  # [label](target "title")
    REFERENCE = "reference"  # [id]: target
    AUTOLINK = "autolink"  # <https://example.com/a>
    HTML = "html"  # <a href="target">
    WIKI = "wiki"  # [[Target]], [[Target|label]], [[Target#section]]


@dataclass(frozen=True, slots=True)
class HyperlinkTarget:
    """A link's target as written in the text, and the form it was written in."""

    target: str
    form: LinkForm


@dataclass(frozen=True, slots=True)
class FoundLink:
    """A link from the text's document to another document (its external id)."""

    target: str
    type: str
    weight: float = 1.0


# ---------------------------------------------------------------------------------------
# Hyperlinks
# ---------------------------------------------------------------------------------------

# Target, then an optional label; neither holds a bracket (so a run of brackets fails at
# once), a backtick (a code span would take precedence) or a line break. Negated classes
# only, so one attempt scans at most to the next bracket: no backtracking to speak of.
_WIKI_LINK: Final = re.compile(r"\[\[([^\[\]|`\n]+)(?:\|[^\[\]`\n]*)?\]\]")
_HTML_A_TAG: Final = re.compile(r"<a[\s/>]", re.IGNORECASE)


def _wiki_link(state: StateInline, silent: bool) -> bool:
    """markdown-it inline rule: ``[[Target]]``, ``[[Target|label]]``, ``[[Target#s]]``."""
    if not state.src.startswith("[[", state.pos):
        return False
    if state.pos > 0 and state.src[state.pos - 1] == "!":
        return False  # ![[x]]: an embed, which is no link, as an image is not
    match = _WIKI_LINK.match(state.src, state.pos, state.posMax)
    if match is None or not match.group(1).strip():
        return False
    if not silent:
        token = state.push("wiki_link", "", 0)
        token.meta["target"] = match.group(1)
    state.pos = match.end()
    return True


def _link_with_form(state: StateInline, silent: bool) -> bool:
    """CommonMark's link rule, marking each link inline or a reference use.

    The tokens do not say which form a link had; the source does: an inline link ends
    with its ``)``, every reference form (``[a][b]``, ``[a][]``, ``[a]``) with ``]``.
    """
    first = len(state.tokens)
    if not _commonmark_link(state, silent):
        return False
    if not silent:
        form = LinkForm.INLINE if state.src[state.pos - 1] == ")" else LinkForm.REFERENCE
        # Text waiting before the link is pushed first: look for the link's own token.
        for token in state.tokens[first:]:
            if token.type == "link_open":
                token.meta["form"] = form
                break
    return True


class _RawLinkParser(MarkdownIt):
    """CommonMark with raw HTML and wiki links, keeping every link target as written."""

    def __init__(self) -> None:
        super().__init__("commonmark", {"html": True})
        self.disable("code")
        self.inline.ruler.at("link", _link_with_form)
        self.inline.ruler.before("link", "wiki_link", _wiki_link)

    def normalizeLink(self, url: str) -> str:  # noqa: N802 (markdown-it's name)
        # The default percent-encodes (and punycodes hosts): resolution decodes paths
        # itself and wants the target as the author wrote it.
        return url

    def validateLink(self, url: str) -> bool:  # noqa: N802 (markdown-it's name)
        # The default drops javascript:, file: and data: links, a renderer's safety
        # concern; here a target that names no document simply resolves to nothing.
        return True


@cache
def _markdown() -> _RawLinkParser:
    # Parsing keeps its state per call, so one parser serves every call.
    return _RawLinkParser()


def _html_hrefs(html: str, parser: Any) -> list[str]:
    """The ``href`` of every ``<a>`` in an HTML fragment, entities decoded."""
    try:
        root = lxml.etree.fromstring(html.encode("utf-8", "replace"), parser)
    except lxml.etree.LxmlError:
        return []
    if root is None:  # nothing but blanks or comments
        return []
    hrefs: list[str] = []
    for element in root.iter("a"):
        href = element.get("href")
        if isinstance(href, str):
            hrefs.append(href)
    return hrefs


def _inline_targets(children: Iterable[Token], html_parser: Any) -> Iterator[tuple[str, LinkForm]]:
    """The targets among a paragraph's (or a heading's, a cell's) inline tokens."""
    for child in children:
        if child.type == "link_open":
            if child.markup == "autolink":
                yield str(child.attrGet("href") or ""), LinkForm.AUTOLINK
            elif child.meta.get("form") == LinkForm.INLINE:
                yield str(child.attrGet("href") or ""), LinkForm.INLINE
            # else a reference use: its definition is reported where it stands
        elif child.type == "wiki_link":
            yield child.meta["target"], LinkForm.WIKI
        elif child.type == "html_inline" and _HTML_A_TAG.match(child.content):
            for href in _html_hrefs(child.content, html_parser):
                yield href, LinkForm.HTML


def hyperlink_targets(text: str) -> list[HyperlinkTarget]:
    """Every hyperlink in ``text``, in order of appearance (module docstring: forms).

    Targets are as written, stripped of surrounding whitespace; an empty target (``[a]()``)
    is left out. The same target written twice is listed twice.
    """
    if "<" not in text and ("[" not in text or "]" not in text):
        # Autolinks and HTML need "<", the bracket forms both "[" and "]": spare the parse.
        return []
    env: dict[str, Any] = {}
    tokens = _markdown().parse(text, env)
    # A parser per call: lxml's parsers keep state and are not to be shared by threads.
    html_parser = lxml.etree.HTMLParser(
        recover=True, no_network=True, encoding="utf-8", huge_tree=True
    )
    # (line, order, target): blocks come in document order, but the reference
    # definitions are only in env, placed by their line; no block shares their lines.
    found: list[tuple[int, int, HyperlinkTarget]] = []

    def add(line: int, target: str, form: LinkForm) -> None:
        target = target.strip()
        if target:
            found.append((line, len(found), HyperlinkTarget(target, form)))

    for token in tokens:
        line = token.map[0] if token.map else 0
        if token.type == "html_block":
            for href in _html_hrefs(token.content, html_parser):
                add(line, href, LinkForm.HTML)
        elif token.type == "inline":
            for target, form in _inline_targets(token.children or (), html_parser):
                add(line, target, form)
    for reference in env.get("references", {}).values():
        add(reference["map"][0], reference["href"], LinkForm.REFERENCE)
    found.sort(key=lambda item: (item[0], item[1]))
    return [target for _, _, target in found]


# ---------------------------------------------------------------------------------------
# Resolution
# ---------------------------------------------------------------------------------------

_FILE_EXTENSIONS: Final = frozenset({".md", ".markdown", ".mdx", ".html", ".htm", ".txt", ".rst"})
_INDEX_NAMES: Final = frozenset({"index", "readme"})
_WEB_SCHEMES: Final = frozenset({"http", "https"})


def _title_key(title: str) -> str:
    """Case-insensitive, runs of whitespace as one space, no outer whitespace."""
    return " ".join(title.split()).casefold()


def _split(target: str) -> SplitResult | None:
    try:
        return urlsplit(target.strip())
    except ValueError:  # a malformed URL ("http://[x"): names no document
        return None


def _normalise_path(path: str) -> str:
    """Percent-decoded, ``.`` and ``..`` folded, no leading or trailing ``/``."""
    # The leading "/" keeps ".." from climbing above the root ("../a" is "a").
    return posixpath.normpath("/" + unquote(path)).lstrip("/")


def _without_extension(path: str) -> str:
    stem, extension = posixpath.splitext(path)
    return stem if extension.lower() in _FILE_EXTENSIONS else path


def _canonical_path(path: str) -> str:
    """A path without its file extension, and a folder's index file as the folder."""
    path = _without_extension(path)
    folder, name = posixpath.split(path)
    return folder if name.lower() in _INDEX_NAMES else path


class DocumentNames:
    """The names a tenant's documents answer to: external ids, their paths, titles.

    Built from ``(external_id, title)`` pairs; ``hosts`` (lowercase host names), when
    given, are the only hosts whose URLs are read as paths of the tenant's documents
    (``None``: any host, so ``https://example.com/guide/intro`` finds
    ``guide/intro.md``). The module docstring gives the resolution steps.
    """

    def __init__(
        self, documents: Iterable[tuple[str, str]], *, hosts: Collection[str] | None = None
    ) -> None:
        self._ids: set[str] = set()
        self._paths: dict[str, str] = {}
        self._canonical: dict[str, str] = {}
        self._titles: dict[str, str] = {}
        self._hosts = None if hosts is None else frozenset(h.lower() for h in hosts)
        for external_id, title in documents:
            self._ids.add(external_id)
            path = self._path_of(external_id, any_host=True)
            if path:
                _keep_smallest(self._paths, path, external_id)
                canonical = _canonical_path(path)
                if canonical:
                    _keep_smallest(self._canonical, canonical, external_id)
            key = _title_key(title)
            if key:
                _keep_smallest(self._titles, key, external_id)

    def resolve(self, target: str, *, form: LinkForm, base: str | None = None) -> str | None:
        """The external id of the document ``target`` names, or ``None``.

        ``base`` is the linking document's external id: a relative path is read from its
        folder first.
        """
        target = target.strip()
        if form is LinkForm.WIKI:
            name = target.partition("#")[0].strip()
            if not name:
                return None  # [[#section]]: a place in the same document
            return (
                self._by_title(name)
                or self._by_title(name.replace("_", " "))
                or (name if name in self._ids else None)
                or self._by_path(name, base=base)
            )
        if target in self._ids:
            return target
        parts = _split(target)
        if parts is None:
            return None
        found = self._by_path(target, base=base)
        if found is not None or parts.scheme or parts.netloc:
            return found
        decoded = _normalise_path(parts.path)
        return self._by_title(decoded) or self._by_title(_without_extension(decoded))

    def _by_title(self, name: str) -> str | None:
        return self._titles.get(_title_key(name))

    def _path_of(self, target: str, *, any_host: bool) -> str | None:
        """The path a target or an id names, normalised; ``None`` for no path."""
        parts = _split(target)
        if parts is None:
            return None
        if parts.scheme in _WEB_SCHEMES or (not parts.scheme and parts.netloc):
            host = (parts.hostname or "").lower()
            if not any_host and self._hosts is not None and host not in self._hosts:
                return None
        elif parts.scheme and parts.scheme != "file":
            return None  # mailto:, tel:, urn:, ...: not a place in a tree of documents
        path = _normalise_path(parts.path)
        return path or None

    def _by_path(self, target: str, *, base: str | None) -> str | None:
        path = self._path_of(target, any_host=False)
        if path is None:
            return None
        candidates = [path]
        parts = _split(target)
        relative = parts is not None and not parts.scheme and not parts.netloc
        if relative and parts is not None and not parts.path.startswith("/") and base:
            base_path = self._path_of(base, any_host=True)
            folder = posixpath.dirname(base_path) if base_path else ""
            if folder:
                candidates.insert(0, _normalise_path(posixpath.join(folder, parts.path)))
        for candidate in candidates:
            found = self._paths.get(candidate)
            if found is None:
                canonical = _canonical_path(candidate)
                found = self._canonical.get(canonical) if canonical else None
            if found is not None:
                return found
        return None


def _keep_smallest(index: dict[str, str], key: str, external_id: str) -> None:
    """One name, several documents: the smallest external id answers, whatever the order."""
    held = index.get(key)
    if held is None or external_id < held:
        index[key] = external_id


# ---------------------------------------------------------------------------------------
# Title mentions
# ---------------------------------------------------------------------------------------

# A trailing "(...)" without nested parentheses: each "(" is tried once and the class
# stops at the next parenthesis, so the search is linear in the title.
_QUALIFIER: Final = re.compile(r"\([^()]*\)$")
_WHITESPACE: Final = re.compile(r"\s+")
# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Hangul jamo,
# kana, CJK ideographs, Hangul syllables, halfwidth kana) and Korean, whose particles
# join the noun before them: a title there has no word edges to check.
_UNSPACED: Final = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f]"
)


@dataclass(frozen=True, slots=True)
class MentionRule:
    """How a title is found in a text (module docstring: measured on MuSiQue).

    ``whole_words``: an occurrence must not start or end inside a word; ``False`` is the
    MuSiQue rule (any substring). ``min_length``: titles shorter than this many
    characters (after the qualifier is dropped) are not looked for. ``strip_qualifier``:
    a trailing parenthesised qualifier is dropped from the title first.
    """

    whole_words: bool = True
    min_length: int = 4
    strip_qualifier: bool = True

    def __post_init__(self) -> None:
        if self.min_length < 1:
            raise ValueError(f"min_length must be >= 1, got {self.min_length}")


MUSIQUE_MENTIONS: Final = MentionRule(whole_words=False)
"""The rule that derived ``edges.tsv`` of the MuSiQue sample: any substring."""


def mention_key(title: str, rule: MentionRule) -> str | None:
    """What is looked for in a text for ``title`` under ``rule``; ``None``: not looked for."""
    if rule.strip_qualifier:
        title = title.rstrip()
        qualifier = _QUALIFIER.search(title)
        if qualifier is not None:
            title = title[: qualifier.start()]
    key = _title_key(title)
    return key if len(key) >= rule.min_length else None


@cache  # a text has few distinct characters, and each occurrence asks about two
def _is_word_character(character: str) -> bool:
    return (character.isalnum() or character == "_") and not _UNSPACED.match(character)


def _inside_word(text: str, boundary: int) -> bool:
    """Whether the place between ``text[boundary - 1]`` and ``text[boundary]`` is in a word."""
    return (
        0 < boundary < len(text)
        and _is_word_character(text[boundary - 1])
        and _is_word_character(text[boundary])
    )


class TitleMentions:
    """Finds which documents' titles a text mentions (module docstring: the rule).

    Built once per tenant from ``(external_id, title)`` pairs; :meth:`find` is then one
    pass over the text.
    """

    def __init__(
        self, documents: Iterable[tuple[str, str]], *, rule: MentionRule = MentionRule()
    ) -> None:
        self.rule = rule
        holders: dict[str, set[str]] = {}
        for external_id, title in documents:
            key = mention_key(title, rule)
            if key is not None:
                holders.setdefault(key, set()).add(external_id)
        self._holders = {key: tuple(sorted(ids)) for key, ids in holders.items()}
        self._automaton: Any = None
        if self._holders:
            self._automaton = ahocorasick.Automaton()
            for key in self._holders:
                self._automaton.add_word(key, key)
            self._automaton.make_automaton()

    def find(self, text: str, *, self_id: str | None = None) -> list[str]:
        """External ids of the documents ``text`` mentions, ``self_id`` left out.

        In order of first mention; a title held by several documents gives each of them,
        in external id order.
        """
        mentioned: list[str] = []
        seen: set[str] = set()
        for key in self._titles_in(text):
            for external_id in self._holders[key]:
                if external_id != self_id and external_id not in seen:
                    seen.add(external_id)
                    mentioned.append(external_id)
        return mentioned

    def _titles_in(self, text: str) -> list[str]:
        """The titles occurring in ``text``: leftmost first, longest at a place, no overlap."""
        if self._automaton is None:
            return []
        folded = _WHITESPACE.sub(" ", text).casefold()
        occurrences: list[tuple[int, int, str]] = []
        for last, key in self._automaton.iter(folded):
            start, end = last - len(key) + 1, last + 1
            if self.rule.whole_words and (_inside_word(folded, start) or _inside_word(folded, end)):
                continue
            occurrences.append((start, -len(key), key))
        occurrences.sort()
        titles: list[str] = []
        seen: set[str] = set()
        taken_to = 0
        for start, negative_length, key in occurrences:
            if start < taken_to:
                continue  # overlaps an occurrence already taken (further left, or longer)
            taken_to = start - negative_length
            if key not in seen:
                seen.add(key)
                titles.append(key)
        return titles


# ---------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------


def find_links(
    text: str,
    *,
    names: DocumentNames,
    mentions: TitleMentions | None,
    self_id: str,
    kinds: Collection[TextLinks],
) -> list[FoundLink]:
    """The links ``text`` (the document ``self_id``'s) makes to other documents.

    ``kinds`` chooses what is looked for: hyperlinks (and wiki links) resolved by
    ``names`` give ``link`` links, title mentions found by ``mentions`` (required then)
    give ``mention`` links. One link per (target, type), never to ``self_id``; links
    first, in order of appearance, then mentions, in order of first mention.
    """
    wanted: set[TextLinks] = set()
    for kind in kinds:
        try:
            wanted.add(TextLinks(kind))
        except ValueError:
            allowed = ", ".join(k.value for k in TextLinks)
            raise ValueError(f"unknown text link kind {kind!r}; allowed: {allowed}") from None
    if TextLinks.MENTIONS in wanted and mentions is None:
        raise ValueError("kinds asks for mentions, but no TitleMentions was given")
    links: list[FoundLink] = []
    if TextLinks.HYPERLINKS in wanted:
        linked: set[str] = set()
        for hyperlink in hyperlink_targets(text):
            target = names.resolve(hyperlink.target, form=hyperlink.form, base=self_id)
            if target is not None and target != self_id and target not in linked:
                linked.add(target)
                links.append(FoundLink(target=target, type=LINK_TYPE))
    if TextLinks.MENTIONS in wanted and mentions is not None:
        links.extend(
            FoundLink(target=target, type=MENTION_TYPE)
            for target in mentions.find(text, self_id=self_id)
        )
    return links
