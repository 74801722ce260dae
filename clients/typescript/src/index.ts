/**
 * The TypeScript client of the hsearch API: search, answers (whole or streamed),
 * documents and jobs, with an API key or a browser's search token.
 */

export {
  Client,
  DEFAULT_URL,
  PAGE_SIZE,
  VERSION,
  answerEvent,
  type CallOptions,
  type ClientOptions,
  type Fetch,
  type TokenSource,
} from "./client.js";
export * from "./errors.js";
export { MIN_PAUSE_MS, retryAfterOf, type RetryOptions } from "./retry.js";
export { EventReader, type ServerEvent } from "./sse.js";
export type * from "./types.js";
export type { components, operations, paths } from "./openapi.js";
