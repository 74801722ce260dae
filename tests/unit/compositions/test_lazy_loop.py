"""The lazy search's loop on made-up neighbourhoods (no store): the budget is never
exceeded whatever the graph, the tester and the model; it stops when the claims
suffice; it deepens from relevant chunks to what only a link reaches; a model's
judgements are untrusted input; claims are verbatim spans."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from hsearch.compositions.answers.prompts import prompt_cost
from hsearch.compositions.lazy.budget import LazyLimits, LazySpend
from hsearch.compositions.lazy.calls import ModelCalls
from hsearch.compositions.lazy.claims import CheapSufficiency, ExtractiveClaims
from hsearch.compositions.lazy.models import (
    Candidate,
    Claim,
    Gathered,
    Judgement,
    LazyProgress,
    Origin,
    Stage,
)
from hsearch.compositions.lazy.search import LazyLoop
from hsearch.compositions.lazy.service import claim_passages
from hsearch.compositions.lazy.testers import (
    CheapTester,
    JudgeContext,
    ModelTester,
    parse_judgements,
)
from hsearch.errors import ModelError
from hsearch.llm.protocol import ChatMessage, Usage


@dataclass
class Graph:
    """Chunks by id: their titles, texts and neighbours."""

    texts: dict[str, tuple[str, str]]
    edges: dict[str, list[str]]
    first: list[str]
    degraded: list[str] = field(default_factory=list)
    expanded: list[str] = field(default_factory=list)

    async def start(self, spend: LazySpend) -> list[Candidate]:
        return [
            Candidate(
                chunk_id=c, origin=Origin.RETRIEVAL, prior=max(0.0, 1.0 - i * 0.3), rank=i + 1
            )
            for i, c in enumerate(self.first)
        ]

    async def read(self, candidates: Sequence[Candidate], spend: LazySpend) -> list[Candidate]:
        for c in candidates:
            c.title, c.text = self.texts[c.chunk_id]
            c.document_id = c.external_id = c.chunk_id
        return list(candidates)

    async def expand(
        self, candidate: Candidate, judgement: Judgement, spend: LazySpend
    ) -> list[Candidate]:
        self.expanded.append(candidate.chunk_id)
        return [
            Candidate(chunk_id=n, origin=Origin.LINKS, prior=1.0)
            for n in self.edges.get(candidate.chunk_id, [])
        ]


@dataclass
class RandomTester:
    rng: random.Random
    name: str = "random"

    async def judge(self, batch: Sequence[Candidate], context: JudgeContext) -> list[Judgement]:
        out = []
        for c in batch:
            score = self.rng.random()
            out.append(Judgement(c.chunk_id, score > 0.5, score, "random"))
        return out


class RandomModel:
    """Replies anything, counts any usage up to what the call was paid for, may fail."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.calls = 0

    @property
    def model(self) -> str:
        return "random"

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
        first_token_timeout_s: float,
    ) -> AsyncGenerator[str | Usage, None]:
        self.calls += 1
        if self.rng.random() < 0.2:
            raise ModelError("down")
        yield "\n".join(
            f"{self.rng.randint(-1, 12)}: {self.rng.choice(['yes', 'no', 'maybe'])}"
            for _ in range(self.rng.randint(0, 10))
        )
        # What it counts is within what the call was paid for (the estimate errs high).
        paid = prompt_cost(messages) + max_tokens
        prompt = self.rng.randint(0, prompt_cost(messages))
        yield Usage(prompt, self.rng.randint(0, paid - prompt))

    async def ping(self, *, timeout_s: float) -> None:
        pass

    async def aclose(self) -> None:
        pass


WORDS = [
    "volcano",
    "lava",
    "river",
    "sea",
    "magma",
    "island",
    "plate",
    "ocean",
    "glacier",
    "valley",
]


def random_graph(rng: random.Random, n: int) -> Graph:
    texts = {
        f"c{i}": (
            rng.choice(WORDS),
            ". ".join(" ".join(rng.choices(WORDS, k=5)) for _ in range(rng.randint(1, 4))) + ".",
        )
        for i in range(n)
    }
    edges = {f"c{i}": [f"c{rng.randrange(n)}" for _ in range(rng.randint(0, 4))] for i in range(n)}
    return Graph(texts, edges, first=[f"c{i}" for i in rng.sample(range(n), min(n, 5))])


async def gather(
    loop: LazyLoop, graph: Graph, spend: LazySpend, question: str = "volcano lava"
) -> tuple[list[LazyProgress], Gathered]:
    progress: list[LazyProgress] = []
    gathered = None
    async for event in loop.run(question, graph, spend, context_tokens=200):
        if isinstance(event, Gathered):
            gathered = event
        else:
            progress.append(event)
    assert gathered is not None
    return progress, gathered


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nodes=st.integers(1, 40),
    tests=st.integers(1, 40),
    calls=st.integers(0, 6),
    tokens=st.integers(0, 3000),
    batch=st.integers(1, 9),
    model=st.booleans(),
)
def test_the_budget_is_never_exceeded(
    seed: int, nodes: int, tests: int, calls: int, tokens: int, batch: int, model: bool
) -> None:
    rng = random.Random(seed)
    graph = random_graph(rng, nodes)
    spend = LazySpend(LazyLimits(tests, calls, tokens, 60.0))
    llm = RandomModel(rng)
    tester = ModelTester(ModelCalls(llm, spend, timeout_s=5)) if model else RandomTester(rng)
    loop = LazyLoop(tester, ExtractiveClaims(), CheapSufficiency(), batch=batch)
    _, gathered = asyncio.run(gather(loop, graph, spend))
    assert spend.tests <= tests
    assert spend.calls <= calls
    assert llm.calls <= calls
    assert spend.tokens <= tokens
    for line in gathered.report.budget.values():
        if line is not gathered.report.budget["elapsed_ms"]:
            assert line.used <= line.allowed
    assert gathered.report.tested == spend.tests
    if gathered.report.stopped is Stage.BUDGET_SPENT:
        assert spend.tests == tests or spend.out_of_time()


def test_the_budget_stops_a_search_with_more_to_test() -> None:
    rng = random.Random(7)
    graph = random_graph(rng, 60)
    graph.edges = {c: [f"c{(int(c[1:]) + 1) % 60}"] for c in graph.texts}  # a ring
    always = CheapTester(threshold=0.0)
    spend = LazySpend(LazyLimits(12, 0, 0, 60.0))
    _, gathered = asyncio.run(
        gather(LazyLoop(always, ExtractiveClaims(), CheapSufficiency(coverage=2.0)), graph, spend)
    )
    assert gathered.report.stopped is Stage.BUDGET_SPENT
    assert gathered.report.tested == 12


def test_it_stops_as_soon_as_the_claims_suffice() -> None:
    texts = {
        f"c{i}": (f"t{i}", "Volcano lava flows downhill. Other things happen.") for i in range(30)
    }
    graph = Graph(texts, {}, first=[f"c{i}" for i in range(30)])

    class AfterTwo:
        def sufficient(
            self, question: str, claims: Sequence[Claim], *, context_tokens: int
        ) -> bool:
            return len(claims) >= 2

    spend = LazySpend(LazyLimits(100, 0, 0, 60.0))
    loop = LazyLoop(CheapTester(threshold=0.0), ExtractiveClaims(), AfterTwo(), batch=4)
    progress, gathered = asyncio.run(gather(loop, graph, spend))
    assert gathered.report.stopped is Stage.SUFFICIENT
    assert gathered.report.tested == 4  # one batch, not the 30 there were
    assert progress[-1].stage is Stage.SUFFICIENT
    assert not graph.expanded  # sufficient before deepening


def test_it_deepens_through_a_link_to_what_the_question_does_not_name() -> None:
    texts = {
        "film": ("Night Train", "Night Train is a film directed by Anna Berg. It won prizes."),
        "anna": ("Anna Berg", "She married Karl Holm in 1990 in Oslo."),  # no question term
        "noise": ("Cheese", "Cheese is made from milk."),
    }
    graph = Graph(texts, {"film": ["anna"]}, first=["film", "noise"])
    spend = LazySpend(LazyLimits(10, 0, 0, 60.0))
    loop = LazyLoop(CheapTester(), ExtractiveClaims(), CheapSufficiency())
    progress, gathered = asyncio.run(
        gather(loop, graph, spend, "Who did the director of Night Train marry?")
    )
    found = [c.chunk_id for c, _, _ in gathered.chunks]
    assert found == ["film", "anna"]
    assert gathered.report.levels == {
        "retrieval": 2,
        "concepts": 0,
        "communities": 0,
        "links": 1,
        "memory": 0,
    }
    assert gathered.report.depth == 1
    anna = gathered.chunks[1]
    assert anna[0].parent == "film"
    assert anna[0].origin is Origin.LINKS
    assert anna[2][0].text == "She married Karl Holm in 1990 in Oslo."
    assert next(p.stage for p in progress) is Stage.STARTING
    # Without the link it is never reached.
    alone = Graph(texts, {}, first=["film", "noise"])
    _, gathered = asyncio.run(
        gather(
            loop,
            alone,
            LazySpend(LazyLimits(10, 0, 0, 60.0)),
            "Who did the director of Night Train marry?",
        )
    )
    assert [c.chunk_id for c, _, _ in gathered.chunks] == ["film"]


def test_a_model_reply_counts_only_for_candidates_it_was_shown() -> None:
    reply = "1: yes\n2: no\n2: yes\n9: yes\n[3]. YES\nsure, 4 is fine\n0: yes"
    assert parse_judgements(reply, count=4) == {0: True, 1: False, 2: True}
    assert parse_judgements("", count=4) == {}


def test_the_model_tester_falls_back_to_the_cheap_one_where_it_does_not_judge() -> None:
    class Says:
        model = "says"

        async def stream(
            self, messages: Sequence[ChatMessage], **_: object
        ) -> AsyncGenerator[str | Usage, None]:
            yield "2: yes"
            yield Usage(10, 2)

        async def ping(self, *, timeout_s: float) -> None:
            pass

        async def aclose(self) -> None:
            pass

    spend = LazySpend(LazyLimits(10, 1, 10_000, 60.0))
    tester = ModelTester(ModelCalls(Says(), spend, timeout_s=5))
    batch = [
        Candidate("a", Origin.RETRIEVAL, 1.0, title="Volcano", text="Volcano lava."),
        Candidate("b", Origin.RETRIEVAL, 0.1, title="Milk", text="Cheese is made from milk."),
    ]
    context = JudgeContext("volcano lava", {})
    first = asyncio.run(tester.judge(batch, context))
    assert [(j.relevant, j.by) for j in first] == [(True, "cheap"), (True, "model")]
    assert spend.calls == 1
    assert spend.tokens == 12
    # The budget's one call is spent: the cheap tester judges everything.
    second = asyncio.run(tester.judge(batch, context))
    assert [j.by for j in second] == ["cheap", "cheap"]
    assert spend.calls == 1


def test_claims_are_verbatim_spans_of_their_chunk() -> None:
    text = "Intro words here.  Volcano lava is hot! Rivers run. Lava cools into rock."
    candidate = Candidate("c", Origin.RETRIEVAL, 1.0, text=text)
    judgement = Judgement("c", True, 0.8, "cheap")
    claims = asyncio.run(
        ExtractiveClaims(per_chunk=2).claims(
            candidate, judgement, question="volcano lava", earlier={}
        )
    )
    assert [c.text for c in claims] == ["Volcano lava is hot!", "Lava cools into rock."]
    assert all(text[c.start : c.end] == c.text for c in claims)
    # None bears on the question (asked in another language, say): the whole chunk.
    other = asyncio.run(
        ExtractiveClaims().claims(candidate, judgement, question="Wo ist Käse?", earlier={})
    )
    assert [c.text for c in other] == [text]
    assert (other[0].start, other[0].end) == (0, len(text))


def test_the_context_gives_every_chunk_s_claim_then_fills_with_more_of_the_first_chunks() -> None:
    def found(chunk: str, text: str, claim: str) -> tuple[Candidate, Judgement, tuple[Claim, ...]]:
        start = text.index(claim)
        return (
            Candidate(chunk, Origin.RETRIEVAL, 1.0, document_id=chunk, text=text),
            Judgement(chunk, True, 0.8, "cheap"),
            (Claim(claim, chunk, start, start + len(claim), 0.8),),
        )

    a = "Volcano lava is hot. It flows downhill. Ash falls far away."
    b = "Islands form over hotspots. Hawaii is one. Its volcanoes are young."
    gathered = Gathered(
        report=None,  # type: ignore[arg-type]  # not read here
        chunks=(found("a", a, "Volcano lava is hot."), found("b", b, "Hawaii is one.")),
    )
    # Room for both claims and a little more: the first chunk's next sentence, joined to
    # its claim as one span.
    given = claim_passages(gathered, question="volcano lava", context_tokens=19)
    assert [(p.candidate.chunk_id, p.text) for p in given] == [
        ("a", "Volcano lava is hot. It flows downhill."),
        ("b", "Hawaii is one."),
    ]
    assert all((p.candidate.text or "")[p.claim.start : p.claim.end] == p.text for p in given)
    # The best chunk whole first (a question one passage answers), the others' claims
    # after it; without that, every claim before any chunk's other sentences.
    assert [
        p.text for p in claim_passages(gathered, question="volcano lava", context_tokens=20)
    ] == [a]
    assert [
        p.text
        for p in claim_passages(gathered, question="volcano lava", context_tokens=20, whole=0)
    ] == ["Volcano lava is hot. It flows downhill.", "Hawaii is one."]
    # Room for everything: each chunk whole, in its own order.
    whole = claim_passages(gathered, question="volcano lava", context_tokens=700)
    assert [p.text for p in whole] == [a, b]
    # Only the claims fit: the claims, in the order the chunks were reached.
    tight = claim_passages(gathered, question="volcano lava", context_tokens=12)
    assert [p.text for p in tight] == ["Volcano lava is hot.", "Hawaii is one."]
    assert [
        p.text for p in claim_passages(gathered, question="x", context_tokens=700, max_sources=1)
    ] == [a]
