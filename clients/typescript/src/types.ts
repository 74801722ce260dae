/**
 * The API's requests and answers as types, named as the Python client names them,
 * each an alias of a schema of the generated `openapi.ts` (`npm run generate`, from
 * the API's OpenAPI document): a field the API adds appears here when the types are
 * generated again.
 */

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

/** Some fields of `T` required, the others optional: a request's input, where a field
 * left out takes the server's default. */
type Input<T, K extends keyof T> = Partial<T> & Pick<T, K>;

// Search.

/** `POST /v1/search`'s fields but `query`; each optional (the server's default). */
export type SearchParams = Partial<Omit<Schemas["SearchRequest"], "query">>;
export type SearchResponse = Schemas["SearchResponse"];
export type Hit = Schemas["HitRead"];
export type Explanation = Schemas["ExplanationRead"];
export type LegScore = Schemas["LegScoreRead"];
export type Facet = Schemas["FacetRead"];
export type FacetBucket = Schemas["FacetBucketRead"];
export type LinkedPage = Schemas["LinkedPageRead"];
export type SearchMode = Schemas["SearchMode"];
export type FusionMethod = Schemas["FusionMethod"];
export type Leg = Schemas["Leg"];

// Answers.

/** `POST /v1/answer`'s fields but `query` and `stream` (`answer` or `answerStream`). */
export type AnswerParams = Partial<Omit<Schemas["AnswerRequest"], "query" | "stream">>;
export type Answer = Schemas["AnswerResponse"];
export type Citation = Schemas["CitationRead"];
export type Sentence = Schemas["SentenceRead"];
export type ContextPassage = Schemas["ContextPassageRead"];

/** The stream's first event: the passages the answer is written from. */
export interface RetrievalEvent {
  readonly event: "retrieval";
  readonly standalone_query: string;
  readonly passages: ContextPassage[];
}

/** More of the answer's text, as the model writes it. */
export interface DeltaEvent {
  readonly event: "delta";
  readonly text: string;
}

/** A sentence of the answer checked against the passages, with its citations. */
export interface CitationEvent {
  readonly event: "citation";
  readonly sentence: Sentence;
  readonly citations: Citation[];
}

/** The model broke off (`error` is a stable code); `done` still follows. */
export interface ErrorEvent {
  readonly event: "error";
  readonly error: string;
  readonly detail: string;
}

/** The last event: the whole answer, as `answer()` returns it. */
export interface DoneEvent {
  readonly event: "done";
  readonly answer: Answer;
}

/** A lazy search's progress (`strategy: "lazy"`), before the `retrieval` event. */
export interface ProgressEvent {
  readonly event: "progress";
  /** `starting`, `testing`, `deepening`, then why it stopped: `sufficient`,
   * `budget_spent` or `exhausted`. */
  readonly stage: string;
  readonly tested: number;
  readonly relevant: number;
  readonly claims: number;
}

/** One event of an answer's stream; `event` names which. */
export type AnswerEvent =
  | ProgressEvent
  | RetrievalEvent
  | DeltaEvent
  | CitationEvent
  | ErrorEvent
  | DoneEvent;

// Documents and jobs.

/** A link of a submitted document: its `target`, the rest optional. */
export type LinkInput = Input<Schemas["LinkCreate"], "target">;
/** A document to index: `external_id` and `text`, the rest optional. */
export type DocumentInput = Omit<Input<Schemas["DocumentCreate"], "external_id" | "text">, "links"> & {
  links?: LinkInput[];
};
export type Document = Schemas["DocumentRead"];
export type DocumentPage = Schemas["DocumentPageRead"];
export type DocumentLinks = Schemas["DocumentLinksRead"];
export type LinkedDocument = Schemas["LinkedDocumentRead"];
export type JobAccepted = Schemas["JobAccepted"];
export type Job = Schemas["JobRead"];
export type JobStatus = Schemas["JobStatus"];

// Search tokens.

/** `POST /v1/tokens`: the mandatory filter, and optionally `max_top_k`, `expires_in_s`. */
export type TokenParams = Input<Schemas["TokenCreate"], "filter">;
export type TokenCreated = Schemas["TokenCreated"];
