/**
 * Issue 12's acceptance for pagination, against a real `berth serve` on a store holding 10,000 finished executions
 * (written by the history bench's generator): walking `GET /v1/executions` 250 at a time, and `GET /v1/activity`
 * newest first, while new executions are submitted and run, sees every execution that existed before the walk
 * exactly once and repeats nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateHistory, type GeneratedHistory } from '../../bench/history-generator.ts';
import { NEXT_CURSOR_HEADER } from '../../schemas/api.ts';
import { spawnBerth, type Running } from '../integration/cli-process.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { serverEnv, tokens } from './berth-server.ts';

const EXECUTIONS = 10_000;
/** An admin of scope `*`: it sees every scope's executions, so the walk covers all 10,000. */
const WALKER = 'pagination-walker-token-5e2c9a7f0b3d1864';

const root = mkdtempSync(join(tmpdir(), 'berth-pagination-walk-'));
const dataDir = join(root, 'data');
let history: GeneratedHistory;
let server: Running;
let url: string;

beforeAll(async () => {
  history = await generateHistory(dataDir, EXECUTIONS, () => undefined);
  writeFileSync(join(root, 'tokens.json'), JSON.stringify([{ token: WALKER, scope: '*', role: 'admin' }]), { mode: 0o600 });
  server = spawnBerth(['serve', '--data-dir', dataDir, '--port', '0'], serverEnv(dataDir, { BERTH_DOCKER: '0' }));
  url = (await server.waitForLine(/^Berth listening on http:\/\//, 120_000)).replace('Berth listening on ', '');
  // The read models fold the generated history after the start: wait until the newest generated execution is listed.
  await waitFor(() => page('/v1/activity', 1, undefined, 'desc'), {
    until: ({ items }) => items[0]?.operationId === `history-${EXECUTIONS - 1}`,
    timeoutMs: 120_000,
    what: 'the activity model to fold the generated history',
  });
}, 300_000);

afterAll(async () => {
  await server?.stop('SIGKILL');
  rmSync(root, { recursive: true, force: true });
});

interface Item {
  id: string;
  operationId: string;
}

async function page(path: string, limit: number, cursor?: string, order: 'asc' | 'desc' = 'asc'): Promise<{ items: Item[]; next?: string }> {
  const query = new URLSearchParams({ limit: String(limit), order, ...(cursor ? { cursor } : {}) });
  const response = await fetch(`${url}${path}?${query}`, { headers: { authorization: `Bearer ${WALKER}` } });
  if (!response.ok) throw new Error(`${path}?${query}: ${response.status} ${await response.text()}`);
  return { items: (await response.json()) as Item[], next: response.headers.get(NEXT_CURSOR_HEADER) ?? undefined };
}

/** Submits `true` in the generated default environment, one after another on `lanes` lanes, until `done()`. */
async function submitUntil(done: () => boolean, lanes: number): Promise<number> {
  let submitted = 0;
  const lane = async (n: number) => {
    for (let i = 0; !done(); i++) {
      const response = await fetch(`${url}/v1/executions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ operationId: `during-walk-${n}-${i}-${Date.now()}`, environment: history.defaultEnvironment, command: ['true'] }),
      });
      if (response.status !== 201) throw new Error(`submit: ${response.status} ${await response.text()}`);
      submitted++;
    }
  };
  await Promise.all(Array.from({ length: lanes }, (_, n) => lane(n)));
  return submitted;
}

/** Walks `path` to its last page while executions are submitted; returns what it saw and how many were submitted. */
async function walkUnderInserts(path: string, limit: number, order: 'asc' | 'desc'): Promise<{ seen: Item[]; pages: number; submitted: number }> {
  const seen: Item[] = [];
  let pages = 0;
  let walking = true;
  const inserts = submitUntil(() => !walking, 3);
  try {
    for (let cursor: string | undefined, first = true; first || cursor; first = false) {
      const p = await page(path, limit, cursor, order);
      seen.push(...p.items);
      cursor = p.next;
      pages++;
    }
  } finally {
    walking = false;
  }
  return { seen, pages, submitted: await inserts };
}

function expectEveryGeneratedOnce(seen: Item[]): void {
  const ids = seen.map((x) => x.id);
  expect(new Set(ids).size, 'a record was repeated').toBe(ids.length);
  const generated = seen.map((x) => x.operationId).filter((o) => o.startsWith('history-'));
  expect(generated).toHaveLength(EXECUTIONS);
  expect(new Set(generated)).toEqual(new Set(Array.from({ length: EXECUTIONS }, (_, i) => `history-${i}`)));
}

describe('pagination under concurrent inserts', () => {
  it('should see each of 10,000 executions once walking /v1/executions 250 at a time, oldest first, while more are submitted', async () => {
    const { seen, pages, submitted } = await walkUnderInserts('/v1/executions', 250, 'asc');
    expect(pages).toBeGreaterThanOrEqual(EXECUTIONS / 250);
    expect(submitted, 'no execution was submitted during the walk').toBeGreaterThan(0);
    expectEveryGeneratedOnce(seen);
  }, 300_000);

  it('should see each of them once walking /v1/activity newest first, 1,000 at a time, while more are submitted', async () => {
    const { seen, submitted } = await walkUnderInserts('/v1/activity', 1000, 'desc');
    expect(submitted).toBeGreaterThan(0);
    expectEveryGeneratedOnce(seen);
    // Newest first: the generated history comes out in reverse.
    const generated = seen.filter((x) => x.operationId.startsWith('history-'));
    expect(generated[0].operationId).toBe(`history-${EXECUTIONS - 1}`);
    expect(generated.at(-1)!.operationId).toBe('history-0');
  }, 300_000);
});
