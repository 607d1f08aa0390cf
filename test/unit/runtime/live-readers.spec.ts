/**
 * A large save waits for live readers still behind on its stream, and only for them: not for a stream no one reads,
 * a reader that has every byte, a reader that stopped reading, or past its bound.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { LiveReaders } from '../../../src/runtime/executions/live-readers.ts';

const MiB = 1024 * 1024;

async function timed(wait: Promise<void>): Promise<number> {
  const started = performance.now();
  await wait;
  return performance.now() - started;
}

describe('LiveReaders', () => {
  it('answers at once for a stream no one reads, or whose reader has every byte', async () => {
    const readers = new LiveReaders();
    expect(await timed(readers.caughtUp('e1', 'stdout', 8 * MiB))).toBeLessThan(20);
    readers.noteRead('e2', 'stdout', 8 * MiB);
    expect(await timed(readers.caughtUp('e2', 'stdout', 8 * MiB))).toBeLessThan(20);
    // Another stream's reader is not this stream's.
    readers.noteRead('e3', 'stderr', 0);
    expect(await timed(readers.caughtUp('e3', 'stdout', 8 * MiB))).toBeLessThan(20);
  });

  it('waits while a reader behind keeps reading, and ends when it reaches the size', async () => {
    const readers = new LiveReaders(5_000);
    let cursor = 0;
    readers.noteRead('e1', 'stdout', cursor);
    const reading = (async () => {
      while (cursor < 8 * MiB) {
        await sleep(20);
        cursor += MiB;
        readers.noteRead('e1', 'stdout', cursor);
      }
    })();
    const waited = await timed(readers.caughtUp('e1', 'stdout', 8 * MiB));
    await reading;
    expect(cursor).toBe(8 * MiB);
    // Eight reads 20 ms apart: the wait lasted about as long, and ended with the last one.
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(1_000);
  });

  it('stops waiting for a reader that stopped reading', async () => {
    const readers = new LiveReaders(5_000);
    readers.noteRead('e1', 'stdout', MiB);
    const waited = await timed(readers.caughtUp('e1', 'stdout', 8 * MiB));
    expect(waited).toBeGreaterThanOrEqual(90);
    expect(waited).toBeLessThan(1_000);
  });

  it('waits no longer than its bound for a slow reader, or once the runtime stops', async () => {
    const readers = new LiveReaders(300);
    let reading = true;
    const slow = (async () => {
      for (let cursor = 0; reading; cursor += 1024) {
        readers.noteRead('e1', 'stdout', cursor);
        await sleep(20);
      }
    })();
    const bounded = await timed(readers.caughtUp('e1', 'stdout', 8 * MiB));
    expect(bounded).toBeGreaterThanOrEqual(290);
    expect(bounded).toBeLessThan(1_000);

    const stop = new AbortController();
    setTimeout(() => stop.abort(), 50);
    const unbounded = new LiveReaders(60_000);
    const keepReading = setInterval(() => unbounded.noteRead('e2', 'stdout', 0), 10);
    const stopped = await timed(unbounded.caughtUp('e2', 'stdout', 8 * MiB, stop.signal));
    clearInterval(keepReading);
    reading = false;
    await slow;
    expect(stopped).toBeLessThan(500);
  });
});
