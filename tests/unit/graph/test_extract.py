"""Links found in a document's text: each hyperlink form, each resolution step, title
mentions under both rules (the MuSiQue rule against the sample's edges.tsv), the entry
point, and inputs built to be slow or to break a parser."""

from __future__ import annotations

import csv
import json

import pytest
from bench.datasets import DATASETS_ROOT

from hsearch.graph.extract import (
    LINK_TYPE,
    MENTION_TYPE,
    MUSIQUE_MENTIONS,
    DocumentNames,
    FoundLink,
    HyperlinkTarget,
    LinkForm,
    MentionRule,
    TitleMentions,
    find_links,
    hyperlink_targets,
    mention_key,
)
from hsearch.graph.links import TextLinks

MUSIQUE = DATASETS_ROOT / "en-musique-train-100"
MEGABYTE = 1_000_000


def targets(text: str) -> list[tuple[str, LinkForm]]:
    return [(found.target, found.form) for found in hyperlink_targets(text)]


# --- hyperlink forms ----------------------------------------------------------------


def test_inline_link_with_and_without_title() -> None:
    text = 'See [the guide](guide/intro.md "Intro") and [home](<my home.md>).'
    assert targets(text) == [
        ("guide/intro.md", LinkForm.INLINE),
        ("my home.md", LinkForm.INLINE),
    ]


def test_targets_are_as_written_escapes_and_entities_decoded_nothing_encoded() -> None:
    # markdown-it would percent-encode these by default (ä -> %C3%A4, space -> %20).
    assert targets(r"[a](caf\(e&eacute;) [b](über.md) [c](a%20b.md)") == [
        ("caf(eé", LinkForm.INLINE),
        ("über.md", LinkForm.INLINE),
        ("a%20b.md", LinkForm.INLINE),
    ]


def test_reference_definitions_once_where_defined_first_definition_wins() -> None:
    text = (
        "Read [the intro][intro], [intro] again and [faq].\n"
        "\n"
        "[intro]: guide/intro.md\n"
        '[unused]: <other page.md> "Title"\n'
        "[intro]: ignored-duplicate.md\n"
    )
    # Uses ([..][intro], [intro]) repeat their definition's target, which is listed
    # once; [faq] has no definition, so it is no link at all.
    assert targets(text) == [
        ("guide/intro.md", LinkForm.REFERENCE),
        ("other page.md", LinkForm.REFERENCE),
    ]


def test_autolinks() -> None:
    assert targets("Go to <https://example.com/a?b=1#c> or <me@example.com>.") == [
        ("https://example.com/a?b=1#c", LinkForm.AUTOLINK),
        ("mailto:me@example.com", LinkForm.AUTOLINK),
    ]


def test_html_links_inline_every_quoting_and_entities() -> None:
    text = (
        "One <a href=\"double.md\">x</a>, <a href='single.md'>y</a>, <a href=bare.md>z</a>, "
        '<A HREF = "upper.md">u</A>, <a class="c"\nhref="next-line.md">n</a>, '
        '<a href="a&amp;b&#x20;c.md">e</a>, <a name="anchor">no href</a>.'
    )
    assert targets(text) == [
        ("double.md", LinkForm.HTML),
        ("single.md", LinkForm.HTML),
        ("bare.md", LinkForm.HTML),
        ("upper.md", LinkForm.HTML),
        ("next-line.md", LinkForm.HTML),
        ("a&b c.md", LinkForm.HTML),
    ]


def test_html_block_skips_comments_and_scripts() -> None:
    text = (
        "<div>\n"
        '<p><a href="block.html">x</a></p>\n'
        '<!-- <a href="commented.html"> -->\n'
        "<script>var s = \"<a href='scripted.html'>\";</script>\n"
        "<style>a[href='styled.html'] {}</style>\n"
        '<a href="after.html">y</a>\n'
        "</div>\n"
    )
    assert targets(text) == [("block.html", LinkForm.HTML), ("after.html", LinkForm.HTML)]


def test_wiki_links() -> None:
    text = "[[Plain Page]], [[Target|a label]], [[Sec Page#Part]], [[Both#Part|label]]."
    assert targets(text) == [
        ("Plain Page", LinkForm.WIKI),
        ("Target", LinkForm.WIKI),
        ("Sec Page#Part", LinkForm.WIKI),
        ("Both#Part", LinkForm.WIKI),
    ]


def test_not_wiki_links() -> None:
    # An embed, an empty target, a line break, brackets inside, an unclosed one.
    text = "![[picture.png]] [[ ]] [[two\nlines]] [[a[b]]] [[never closed"
    assert [found for found in hyperlink_targets(text) if found.form is LinkForm.WIKI] == []


def test_links_in_code_are_no_links() -> None:
    text = (
        'Inline `[no](code.md)` and `<a href="code.html">` and ``[[No Wiki]]``.\n'
        "\n"
        "```markdown\n"
        "[fenced](fenced.md) [[Fenced]] <https://fenced.example>\n"
        "[fenced-def]: fenced-def.md\n"
        "```\n"
        "\n"
        "~~~\n"
        '<a href="tilde.html">x</a>\n'
        "~~~\n"
        "\n"
        "[yes](yes.md)\n"
    )
    assert targets(text) == [("yes.md", LinkForm.INLINE)]


def test_indented_text_is_not_code() -> None:
    # Plain text indents paragraphs; CommonMark's indented code would hide this link.
    assert targets("Intro.\n\n    An indented [paragraph](para.md).\n") == [
        ("para.md", LinkForm.INLINE)
    ]


def test_images_are_not_links_but_a_linked_image_is() -> None:
    text = "![alt](picture.png) [![badge](badge.svg)](badge-target.md) ![ref][img]\n\n[img]: x"
    assert targets(text) == [("badge-target.md", LinkForm.INLINE), ("x", LinkForm.REFERENCE)]


def test_order_of_appearance_across_forms_and_containers() -> None:
    text = (
        "# Heading with [h](h.md)\n"
        "\n"
        "> quoted [[Quoted]]\n"
        "\n"
        "[def]: def.md\n"
        "\n"
        "- item <https://item.example>\n"
        "- item <a href='item.html'>i</a>\n"
        "\n"
        "| a | b |\n"
        "|---|---|\n"
        "| [cell](cell.md) | x |\n"
        "\n"
        '<p><a href="block.html">b</a></p>\n'
        "\n"
        "last [l](l.md)\n"
    )
    assert targets(text) == [
        ("h.md", LinkForm.INLINE),
        ("Quoted", LinkForm.WIKI),
        ("def.md", LinkForm.REFERENCE),
        ("https://item.example", LinkForm.AUTOLINK),
        ("item.html", LinkForm.HTML),
        ("cell.md", LinkForm.INLINE),
        ("block.html", LinkForm.HTML),
        ("l.md", LinkForm.INLINE),
    ]


def test_repeats_are_kept_and_empty_targets_dropped() -> None:
    assert targets("[a](x.md) [b](x.md) [c]() [d](<>) <a href=''>e</a>") == [
        ("x.md", LinkForm.INLINE),
        ("x.md", LinkForm.INLINE),
    ]


def test_plain_text_has_no_links() -> None:
    assert hyperlink_targets("Just prose: a > b, (parenthesised) and https://bare.example.") == []
    assert hyperlink_targets("") == []


# --- adversarial inputs ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[" * MEGABYTE, id="open-brackets"),
        pytest.param("[]" * (MEGABYTE // 2), id="bracket-pairs"),
        # A quarter of a megabyte for the slowest forms: seconds each, where a megabyte
        # takes tens on a busy machine (python -m bench.graph_extract shows the growth).
        pytest.param("[" * (MEGABYTE // 8) + "]" * (MEGABYTE // 8), id="nested-brackets"),
        pytest.param("[](" * (MEGABYTE // 12), id="unclosed-destinations"),
        pytest.param("[[a|" * (MEGABYTE // 16) + "]", id="unclosed-wiki-links"),
        pytest.param("[\n" * (MEGABYTE // 8) + "]", id="bracket-lines"),
        pytest.param('<a href="' * (MEGABYTE // 9), id="unclosed-html-attributes"),
        pytest.param("<!--" * (MEGABYTE // 4), id="unclosed-comments"),
    ],
)
def test_a_megabyte_of_brackets_and_broken_markup_finds_nothing(text: str) -> None:
    # Seconds each, where a quadratic regex or html.parser would take hours: a
    # regression shows as this test's timeout.
    assert hyperlink_targets(text) == []


def test_a_megabyte_of_links_finds_every_one() -> None:
    unit = "[[Wiki]] [md](a.md) <a href=b.html>b</a> `[[no]]` "
    text = unit * (MEGABYTE // len(unit))
    found = hyperlink_targets(text)
    assert len(found) == 3 * (MEGABYTE // len(unit))
    assert found[:3] == [
        HyperlinkTarget("Wiki", LinkForm.WIKI),
        HyperlinkTarget("a.md", LinkForm.INLINE),
        HyperlinkTarget("b.html", LinkForm.HTML),
    ]


def test_deep_nesting_and_control_characters_do_not_raise() -> None:
    assert targets("> " * 10_000 + "[x](deep.md)") in ([], [("deep.md", LinkForm.INLINE)])
    assert targets('<div>\x00<a href="nul\x00.md">x</a>\ud800</div>') == [
        ("nul\ufffd.md", LinkForm.HTML)
    ]


# --- resolution -----------------------------------------------------------------------

DOCUMENTS = [
    ("guide/intro.md", "Introduction"),
    ("guide/index.md", "The Guide"),
    ("guide/setup.md", "Setting Up"),
    ("faq.html", "Frequently  Asked\nQuestions"),
    ("about", "About us"),
    ("notes/New York.md", "New York"),
    ("kb-42", "Resetting a password"),
    ("https://docs.example.com/api/keys.html", "API keys"),
    ("dup-b", "Shared Title"),
    ("dup-a", "Shared Title"),
    ("doc:7", "Colon Id"),
]


@pytest.fixture
def names() -> DocumentNames:
    return DocumentNames(DOCUMENTS)


def link(names: DocumentNames, target: str, base: str | None = None) -> str | None:
    return names.resolve(target, form=LinkForm.INLINE, base=base)


def wiki(names: DocumentNames, target: str, base: str | None = None) -> str | None:
    return names.resolve(target, form=LinkForm.WIKI, base=base)


def test_exact_external_id_first(names: DocumentNames) -> None:
    assert link(names, "kb-42") == "kb-42"
    assert link(names, "doc:7") == "doc:7"  # a scheme-like id still matches as itself
    assert link(names, " guide/intro.md ") == "guide/intro.md"


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("./guide/intro.md", "guide/intro.md"),
        ("/guide/intro.md", "guide/intro.md"),
        ("guide/./x/../intro.md", "guide/intro.md"),
        ("../../guide/intro.md", "guide/intro.md"),
        ("guide/intro.md?plain=1#install", "guide/intro.md"),
        ("guide/intro", "guide/intro.md"),
        ("guide/intro.html", "guide/intro.md"),
        ("guide/", "guide/index.md"),
        ("guide", "guide/index.md"),
        ("guide/index.html", "guide/index.md"),
        ("faq", "faq.html"),
        ("faq.md", "faq.html"),
        ("about.html", "about"),
        ("notes/New%20York.md", "notes/New York.md"),
        ("https://elsewhere.example/guide/setup#step-2", "guide/setup.md"),
        ("//cdn.example/guide/setup.md", "guide/setup.md"),
        ("file:///guide/setup.md", "guide/setup.md"),
        ("/api/keys", "https://docs.example.com/api/keys.html"),
        ("https://docs.example.com/api/keys.html#top", "https://docs.example.com/api/keys.html"),
    ],
)
def test_paths(names: DocumentNames, target: str, expected: str) -> None:
    assert link(names, target) == expected


def test_relative_paths_from_the_linking_documents_folder_first() -> None:
    names = DocumentNames(
        [("guide/intro.md", ""), ("intro.md", ""), ("top.md", ""), ("guide/more/page.md", "")]
    )
    base = "guide/setup.md"
    assert link(names, "./intro.md", base=base) == "guide/intro.md"
    assert link(names, "intro", base=base) == "guide/intro.md"
    assert link(names, "more/page", base=base) == "guide/more/page.md"
    assert link(names, "../intro.md", base=base) == "intro.md"
    assert link(names, "/intro", base=base) == "intro.md"  # root-relative
    assert link(names, "top", base=base) == "top.md"  # then from the root
    # An exact external id comes before any path: "intro.md" is one.
    assert link(names, "intro.md", base=base) == "intro.md"
    assert link(names, "./intro.md", base="setup.md") == "intro.md"
    assert link(names, "./intro.md") == "intro.md"


@pytest.mark.parametrize(
    "target",
    [
        "https://other.example/nothing-here",
        "https://other.example/",  # a site's root: not the tenant's index page
        "/",
        "#section",
        "mailto:someone@example.com",
        "tel:+15550100",
        "javascript:alert(1)",
        "http://[broken",
        "guide/missing.md",
        "doc:8",
    ],
)
def test_targets_that_name_no_document(names: DocumentNames, target: str) -> None:
    assert link(names, target) is None


def test_hosts_limit_which_urls_are_read_as_paths() -> None:
    names = DocumentNames(DOCUMENTS, hosts=["Docs.Example.com"])
    assert link(names, "https://docs.example.com/guide/setup") == "guide/setup.md"
    assert link(names, "https://elsewhere.example/guide/setup") is None
    assert link(names, "guide/setup") == "guide/setup.md"  # relative paths are ours


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("introduction", "guide/intro.md"),
        ("Frequently%20asked%20questions", "faq.html"),
        ("Setting%20Up.md", "guide/setup.md"),
        ("./Resetting a password", "kb-42"),
    ],
)
def test_relative_targets_fall_back_to_titles(
    names: DocumentNames, target: str, expected: str
) -> None:
    assert link(names, target) == expected


def test_urls_do_not_fall_back_to_titles(names: DocumentNames) -> None:
    assert link(names, "https://other.example/Introduction") is None


def test_wiki_links_resolve_by_title_first(names: DocumentNames) -> None:
    assert wiki(names, "new york") == "notes/New York.md"
    assert wiki(names, "New_York") == "notes/New York.md"
    assert wiki(names, "New York#History") == "notes/New York.md"
    assert wiki(names, "frequently asked   questions") == "faq.html"
    assert wiki(names, "#History") is None
    # Then an id, then a path (from the linking document's folder first).
    assert wiki(names, "kb-42") == "kb-42"
    assert wiki(names, "notes/New York") == "notes/New York.md"
    assert wiki(names, "setup", base="guide/intro.md") == "guide/setup.md"
    assert wiki(names, "Nowhere") is None


def test_a_title_beats_an_id_for_wiki_links_and_not_for_others() -> None:
    names = DocumentNames([("about", "Team"), ("team-page", "About")])
    assert wiki(names, "About") == "team-page"
    assert link(names, "about") == "about"


def test_shared_names_resolve_to_the_smallest_external_id_whatever_the_order() -> None:
    documents = [("b/page.html", "Same"), ("a-doc", "Same"), ("b/page.md", "Other")]
    for order in (documents, documents[::-1]):
        names = DocumentNames(order)
        assert wiki(names, "Same") == "a-doc"
        assert link(names, "b/page") == "b/page.html"


# --- title mentions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "rule", "expected"),
    [
        ("Glory (1989 film)", MentionRule(), "glory"),
        ("Central High School (Louisville, Kentucky)  ", MentionRule(), "central high school"),
        ("Glory (1989 film)", MentionRule(strip_qualifier=False), "glory (1989 film)"),
        ("(film)", MentionRule(), None),
        ("Mali", MentionRule(), "mali"),
        ("Rio", MentionRule(), None),
        ("Rio", MentionRule(min_length=3), "rio"),
        ("New\n York", MentionRule(), "new york"),
        ("Straße", MentionRule(), "strasse"),
        ("a (b (c))", MentionRule(min_length=1), "a (b (c))"),
    ],
)
def test_mention_keys(title: str, rule: MentionRule, expected: str | None) -> None:
    assert mention_key(title, rule) == expected


def test_min_length_must_be_positive() -> None:
    with pytest.raises(ValueError, match="min_length"):
        MentionRule(min_length=0)


MENTIONED = [
    ("africa", "Africa"),
    ("south-africa", "South Africa"),
    ("water", "Water"),
    ("body-water", "Body water"),
    ("euro-1", "Euro"),
    ("euro-2", "Euro (currency)"),
    ("tokyo", "東京タワー"),
    ("short", "Oslo (city)"),
]


def test_substring_rule_finds_titles_inside_words() -> None:
    mentions = TitleMentions(MENTIONED, rule=MUSIQUE_MENTIONS)
    assert mentions.find("Trade in EUROPEAN and African markets") == [
        "euro-1",
        "euro-2",
        "africa",
    ]


def test_whole_words_rule_finds_only_whole_words() -> None:
    mentions = TitleMentions(MENTIONED)
    assert mentions.find("Trade in European and African markets") == []
    assert mentions.find("Trade in euro, (Africa) and WATER.") == [
        "euro-1",
        "euro-2",
        "africa",
        "water",
    ]


def test_longest_leftmost_occurrence_wins_without_overlap() -> None:
    for rule in (MUSIQUE_MENTIONS, MentionRule()):
        mentions = TitleMentions(MENTIONED, rule=rule)
        assert mentions.find("Born in South Africa.") == ["south-africa"]
        assert mentions.find("Born in South Africa, raised in Africa.") == [
            "south-africa",
            "africa",
        ]
        # The document's own title takes its place, then the document is left out.
        assert mentions.find("Body water is water.", self_id="body-water") == ["water"]
        assert mentions.find("Body water.", self_id="body-water") == []


def test_whitespace_and_case_in_the_text() -> None:
    mentions = TitleMentions(MENTIONED)
    assert mentions.find("born in SOUTH\n   africa") == ["south-africa"]


def test_unspaced_scripts_have_no_word_edges() -> None:
    mentions = TitleMentions(MENTIONED)
    assert mentions.find("昨日は東京タワーに行った") == ["tokyo"]


def test_a_document_never_mentions_itself_and_shared_titles_give_each_holder() -> None:
    mentions = TitleMentions([("b", "Same Name"), ("a", "Same Name"), ("c", "Same Name")])
    assert mentions.find("the same name again") == ["a", "b", "c"]
    assert mentions.find("the same name again", self_id="b") == ["a", "c"]


def test_no_titles_no_mentions() -> None:
    assert TitleMentions([]).find("anything") == []
    assert TitleMentions([("x", "abc"), ("y", "")]).find("abc") == []


def test_many_titles_and_a_megabyte_of_text() -> None:
    titles = [(f"doc-{i}", f"Title Number {i}") for i in range(20_000)]
    mentions = TitleMentions([*titles, ("a-run", "aaaa"), ("a-run-2", "aaaaaa")])
    text = "a" * MEGABYTE + " title number 19999 and title number 7."
    assert mentions.find(text) == ["doc-19999", "doc-7"]
    substring = TitleMentions([*titles, ("a-run", "aaaa")], rule=MUSIQUE_MENTIONS)
    assert substring.find(text) == ["a-run", "doc-19999", "doc-7"]


@pytest.mark.skipif(
    not (MUSIQUE / "edges.tsv").is_file(), reason="needs ../shared/datasets/en-musique-train-100"
)
def test_the_musique_rule_reproduces_the_samples_edges_exactly() -> None:
    corpus = [
        json.loads(line)
        for line in (MUSIQUE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    with (MUSIQUE / "edges.tsv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert {row["type"] for row in rows} == {"title_mention"}
    expected = {(row["source"], row["target"]) for row in rows}
    documents = [(doc["_id"], doc["title"]) for doc in corpus]

    def edges(rule: MentionRule) -> set[tuple[str, str]]:
        mentions = TitleMentions(documents, rule=rule)
        return {
            (doc["_id"], target)
            for doc in corpus
            for target in mentions.find(doc["text"], self_id=doc["_id"])
        }

    assert edges(MUSIQUE_MENTIONS) == expected
    assert len(expected) == 2594
    # The figures the module docstring gives for the default rule.
    whole_words = edges(MentionRule())
    assert whole_words <= expected
    assert len(whole_words) == 2026


# --- the entry point ------------------------------------------------------------------


def entry_point_inputs() -> tuple[DocumentNames, TitleMentions]:
    documents = [
        ("guide/intro.md", "Introduction"),
        ("guide/setup.md", "Setting Up"),
        ("faq.md", "Questions"),
        ("glossary", "Glossary"),
    ]
    return DocumentNames(documents), TitleMentions(documents)


TEXT = (
    "See [setup](setup.md), [[Questions]], [again](./setup) and [me](intro.md).\n"
    "The glossary and the questions, and the introduction too.\n"
    "[[Nowhere]] <https://example.com/elsewhere>\n"
)


def test_find_links_both_kinds() -> None:
    names, mentions = entry_point_inputs()
    found = find_links(
        TEXT,
        names=names,
        mentions=mentions,
        self_id="guide/intro.md",
        kinds={TextLinks.HYPERLINKS, TextLinks.MENTIONS},
    )
    assert found == [
        FoundLink("guide/setup.md", LINK_TYPE),
        FoundLink("faq.md", LINK_TYPE),
        # "Questions" first in the wiki link: mentions read the text, markup and all;
        # "introduction" is the document's own title.
        FoundLink("faq.md", MENTION_TYPE),
        FoundLink("glossary", MENTION_TYPE),
    ]
    assert {link.weight for link in found} == {1.0}


def test_find_links_one_kind_at_a_time() -> None:
    names, mentions = entry_point_inputs()
    hyperlinks = find_links(
        TEXT, names=names, mentions=None, self_id="guide/intro.md", kinds=[TextLinks.HYPERLINKS]
    )
    assert {link.type for link in hyperlinks} == {LINK_TYPE}
    only_mentions = find_links(
        TEXT,
        names=names,
        mentions=mentions,
        self_id="guide/intro.md",
        kinds=[TextLinks.MENTIONS],
    )
    assert [link.target for link in only_mentions] == ["faq.md", "glossary"]
    assert find_links(TEXT, names=names, mentions=mentions, self_id="x", kinds=()) == []


def test_find_links_refuses_unknown_kinds_and_mentions_without_titles() -> None:
    names, _ = entry_point_inputs()
    with pytest.raises(ValueError, match="allowed: hyperlinks, mentions"):
        find_links(TEXT, names=names, mentions=None, self_id="x", kinds=["links"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no TitleMentions"):
        find_links(TEXT, names=names, mentions=None, self_id="x", kinds=[TextLinks.MENTIONS])


def test_find_links_is_deterministic() -> None:
    names, mentions = entry_point_inputs()
    runs = {
        tuple(
            find_links(
                TEXT,
                names=names,
                mentions=mentions,
                self_id="glossary",
                kinds=[TextLinks.MENTIONS, TextLinks.HYPERLINKS],
            )
        )
        for _ in range(3)
    }
    assert len(runs) == 1
