import { describe, expect, it } from 'vitest';
import { SseParser } from '../../../src/client/sse-parser.ts';
import { formatSseComment, formatSseEvent } from '../../../schemas/sse-frames.ts';

describe('SSE format', () => {
  it('should write id, event and data lines followed by a blank line', () => {
    expect(formatSseEvent({ id: 'stdout:12', event: 'output', data: '{"a":1}' })).toBe(
      'id: stdout:12\nevent: output\ndata: {"a":1}\n\n',
    );
  });

  it('should split multi-line data and keep line breaks out of id and event', () => {
    expect(formatSseEvent({ id: 'a\nb', event: 'x\r\ny', data: 'one\ntwo' })).toBe('id: a b\nevent: x y\ndata: one\ndata: two\n\n');
    expect(formatSseComment('heartbeat')).toBe(': heartbeat\n\n');
  });

  it('should parse back what it writes, whatever the chunking, skipping comments', () => {
    const text =
      formatSseComment('hi') +
      formatSseEvent({ id: '7', event: 'execution.accepted', data: '{"x":"y"}' }) +
      formatSseEvent({ event: 'status', data: 'line1\nline2' });
    for (const size of [1, 2, 3, 7, text.length]) {
      const parser = new SseParser();
      const events = [];
      for (let i = 0; i < text.length; i += size) events.push(...parser.push(text.slice(i, i + size)));
      expect(events).toEqual([
        { id: '7', event: 'execution.accepted', data: '{"x":"y"}' },
        { id: '7', event: 'status', data: 'line1\nline2' }, // the last event id carries over, as in browsers
      ]);
    }
  });

  it('should accept CRLF and CR line endings split across chunks', () => {
    const parser = new SseParser();
    const events = [...parser.push('data: a\r'), ...parser.push('\n\r\n'), ...parser.push('data: b\r\r')];
    expect(events.map((e) => e.data)).toEqual(['a']); // a final lone CR may be half of CRLF: wait for more
    events.push(...parser.push(': more\n'));
    expect(events.map((e) => e.data)).toEqual(['a', 'b']);
  });
});
