/**
 * Server-sent events on the wire (DESIGN §7): `id:`, `event:`, `data:` lines and a blank line, `:` comments as
 * heartbeats, and the output event both the gateway and an Execution Host send (`id: <stream>:<cursor after its
 * bytes>`, `event: output`, `data: {"stream","cursor" (of its first byte),"data" (base64)}`). Pure codec, like
 * ws-frames.ts, so either server formats the same frames without importing the other.
 */
import type { OutputStream } from './output.ts';

export interface SseEvent {
  id?: string;
  event?: string;
  /** May span lines: each becomes its own `data:` line. */
  data: string;
}

/** Field values cannot hold line breaks; ids and types are ours, so this only guards against surprises. */
const oneLine = (value: string): string => value.replace(/[\r\n]+/g, ' ');

export function formatSseEvent(event: SseEvent): string {
  let text = '';
  if (event.id !== undefined) text += `id: ${oneLine(event.id)}\n`;
  if (event.event !== undefined) text += `event: ${oneLine(event.event)}\n`;
  for (const line of event.data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
  return `${text}\n`;
}

export const formatSseComment = (text: string): string => `: ${oneLine(text)}\n\n`;

/** The output event of `data`, the bytes of `stream` from `cursor` to `next`; its id resumes after them. */
export const outputSseEvent = (stream: OutputStream, cursor: number, data: Buffer, next: number): SseEvent => ({
  id: `${stream}:${next}`,
  event: 'output',
  data: JSON.stringify({ stream, cursor, data: data.toString('base64') }),
});
