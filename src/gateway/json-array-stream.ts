/**
 * A JSON array written as its items come, a page at a time: `[`, the items separated by commas, `]`. Each page is
 * asked for only once the one before has been taken by the client (the readable's backpressure), so an answer of
 * any length holds one page. A page that fails ends the answer short (the client sees broken JSON, never a short
 * array that parses).
 */
import { Readable } from 'node:stream';
import { stringifyWire } from './wire-json.ts';

export function jsonArrayStream<T>(pages: AsyncIterable<T[]>, toWire: (item: T) => unknown): Readable {
  return Readable.from(
    (async function* () {
      let first = true;
      yield '[';
      for await (const page of pages) {
        if (page.length === 0) continue;
        yield (first ? '' : ',') + page.map((item) => stringifyWire(toWire(item))).join(',');
        first = false;
      }
      yield ']';
    })(),
    { objectMode: false },
  );
}
