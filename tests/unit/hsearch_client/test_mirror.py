"""The package mirrors the API: each model of a response or of a request's input has the
fields of the API's schema (by the names the API sends), the graph options the keys the
graph leg reads, and each stable error code of the server's hierarchy is raised as a
class of the same status. A field or code added to the API without the client fails
here."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from pydantic import BaseModel

from hsearch import errors as server_errors
from hsearch.graph.params import GraphParams
from hsearch_api.schemas import answers, communities, documents, search
from hsearch_client import errors as client_errors
from hsearch_client import models

PAIRS: list[tuple[type[BaseModel], type[models.ApiModel]]] = [
    (search.SearchResponse, models.SearchResponse),
    (search.HitRead, models.Hit),
    (search.ExplanationRead, models.Explanation),
    (search.LegScoreRead, models.LegScore),
    (search.LinkedPageRead, models.LinkedPage),
    (search.TermMatchRead, models.TermMatch),
    (search.LegRead, models.LegReport),
    (search.FacetRead, models.Facet),
    (search.FacetBucketRead, models.FacetBucket),
    (search.FacetBasisRead, models.FacetBasis),
    (search.SortRead, models.SortInfo),
    (search.SortClauseRead, models.SortClause),
    (search.TimingsRead, models.Timings),
    (answers.AnswerResponse, models.Answer),
    (answers.SentenceRead, models.Sentence),
    (answers.SupportRead, models.Support),
    (answers.CitationRead, models.Citation),
    (answers.ContextPassageRead, models.ContextPassage),
    (answers.AnswerLegRead, models.AnswerLeg),
    (answers.AnswerTimingsRead, models.AnswerTimings),
    (answers.AnswerTokensRead, models.AnswerTokens),
    (documents.DocumentRead, models.Document),
    (documents.DocumentPageRead, models.DocumentPage),
    (documents.DocumentDeleted, models.DocumentDeleted),
    (documents.DocumentCreate, models.DocumentInput),
    (documents.LinkCreate, models.Link),
    (documents.DocumentLinksRead, models.DocumentLinks),
    (documents.LinkedDocumentRead, models.LinkedDocument),
    (documents.JobRead, models.Job),
    (documents.JobPageRead, models.JobPage),
    (documents.JobAccepted, models.JobAccepted),
    (documents.ItemErrorRead, models.JobItemError),
    (documents.WebhookRead, models.Webhook),
    (documents.EncodingRead, models.Encoding),
    (communities.CommunityListRead, models.CommunityList),
    (communities.CommunityRead, models.Community),
    (communities.CommunityDocumentRead, models.CommunityDocument),
    (communities.CommunityDetailRead, models.CommunityDetail),
    (communities.CommunityChunkRead, models.CommunityChunk),
]


def sent_names(model: type[BaseModel]) -> set[str]:
    """The fields' names as they are in the JSON."""
    return {(f.serialization_alias or f.alias or name) for name, f in model.model_fields.items()}


@pytest.mark.parametrize(("api", "client"), PAIRS, ids=[c.__name__ for _, c in PAIRS])
def test_each_model_has_the_fields_of_the_api_s_schema(
    api: type[BaseModel], client: type[models.ApiModel]
) -> None:
    assert sent_names(client) == sent_names(api)


def test_the_graph_options_are_what_the_graph_leg_reads() -> None:
    # The API types a search's ``graph`` as an object; the leg's parameters name its keys.
    names = {f.name for f in dataclasses.fields(GraphParams)}
    assert sent_names(models.GraphOptions) == names


def test_the_stream_events_carry_what_the_api_sends() -> None:
    assert sent_names(models.CitationEvent) - {"event"} == {"sentence", "citations"}
    assert sent_names(models.RetrievalEvent) - {"event"} == {"standalone_query", "passages"}


def server_codes() -> list[type[server_errors.HsearchError]]:
    return [
        cls
        for _, cls in inspect.getmembers(server_errors, inspect.isclass)
        if issubclass(cls, server_errors.HsearchError)
    ]


@pytest.mark.parametrize("server", server_codes(), ids=lambda c: c.code)
def test_each_error_code_is_raised_as_a_class_of_its_status(
    server: type[server_errors.HsearchError],
) -> None:
    raised = client_errors.error_for(server.status_code, server.code)
    assert raised.status_code == server.status_code


def test_a_code_of_its_own_has_a_class_of_its_own() -> None:
    generic = {client_errors.ApiError, *client_errors._BY_STATUS.values()}
    own = [
        cls.code
        for cls in server_codes()
        if client_errors.error_for(cls.status_code, cls.code) not in generic
    ]
    assert "document_not_found" in own
    assert "rate_limited" in own
    assert "insufficient_scope" in own
