/**
 * Server-sent events (`text/event-stream`): a body's bytes as lines, the lines as
 * events whose `data` is JSON, as the API writes an answer's stream (the Python
 * client's `EventReader`).
 */

/** One event of the stream: its name (`message` when none) and its `data`, parsed. */
export interface ServerEvent {
  readonly event: string;
  readonly data: unknown;
}

/** The events of a `text/event-stream` body, fed line by line. */
export class EventReader {
  private event = "message";
  private data: string[] = [];

  /** The event a line ends (an empty line), else `null`. */
  feed(line: string): ServerEvent | null {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return null; // a comment (a keep-alive)
    const colon = line.indexOf(":");
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") this.event = value;
    else if (name === "data") this.data.push(value);
    return null;
  }

  /** The event left when the body ends without its blank line. */
  close(): ServerEvent | null {
    return this.dispatch();
  }

  private dispatch(): ServerEvent | null {
    const event = this.event;
    const data = this.data;
    this.event = "message";
    this.data = [];
    if (data.length === 0) return null;
    return { event, data: JSON.parse(data.join("\n")) as unknown };
  }
}

/** The lines of a body, as its chunks come (`\n`, `\r\n` or `\r` end a line). */
export async function* lines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let done = false;
  try {
    while (!done) {
      const read = await reader.read();
      done = read.done;
      buffer += done ? decoder.decode() : decoder.decode(read.value, { stream: true });
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const char = buffer[i];
        if (char !== "\n" && char !== "\r") continue;
        // A `\r` last in the buffer may be the first half of `\r\n`: wait for more.
        if (char === "\r" && i === buffer.length - 1 && !done) break;
        yield buffer.slice(start, i);
        if (char === "\r" && buffer[i + 1] === "\n") i++;
        start = i + 1;
      }
      buffer = buffer.slice(start);
    }
    if (buffer !== "") yield buffer;
  } finally {
    // Leaving early (the consumer stopped) cancels the body: the connection closes.
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** The events of a body. */
export async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerEvent> {
  const reader = new EventReader();
  for await (const line of lines(body)) {
    const found = reader.feed(line);
    if (found !== null) yield found;
  }
  const last = reader.close();
  if (last !== null) yield last;
}
