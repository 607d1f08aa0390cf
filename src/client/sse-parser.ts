/** Incremental parser of a text/event-stream (the WHATWG format): feed it text, take complete events out. */
export interface ParsedSseEvent {
  id?: string;
  event: string;
  data: string;
}

export class SseParser {
  private buffer = '';
  private id: string | undefined;
  private event = '';
  private data: string[] = [];

  /** Returns the events completed by `text`; comments (heartbeats) are dropped. */
  push(text: string): ParsedSseEvent[] {
    this.buffer += text;
    const events: ParsedSseEvent[] = [];
    let newline: RegExpExecArray | null;
    const lineEnd = /\r\n|\r|\n/g;
    let consumed = 0;
    while ((newline = lineEnd.exec(this.buffer))) {
      // A lone \r at the end of the buffer may be the first half of \r\n: wait for more text.
      if (newline[0] === '\r' && newline.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(consumed, newline.index);
      consumed = newline.index + newline[0].length;
      const event = this.line(line);
      if (event) events.push(event);
    }
    this.buffer = this.buffer.slice(consumed);
    return events;
  }

  private line(line: string): ParsedSseEvent | undefined {
    if (line === '') {
      if (this.data.length === 0 && this.event === '') return undefined;
      const event: ParsedSseEvent = { event: this.event || 'message', data: this.data.join('\n') };
      if (this.id !== undefined) event.id = this.id;
      this.event = '';
      this.data = [];
      return event;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
    return undefined;
  }
}

/** Parses a fetch response body as SSE events. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<ParsedSseEvent> {
  const parser = new SseParser();
  const decoder = new TextDecoder();
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    yield* parser.push(decoder.decode(chunk, { stream: true }));
  }
}
