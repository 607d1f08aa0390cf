/**
 * A member growing the server's memory for good with ordinary checkpoints (DESIGN §13): a capture of a workspace's
 * directory (its manifest, about 1 KB an entry with its stat hints) was kept twice over as hints for the next one, and
 * neither keeper was bounded in entries: the mount service's last capture of every workspace ever checkpointed
 * (deleted ones included, no bound at all) and the inotify watch's baseline of each of the last 256 views watched.
 * After enough workspaces to fill every bounded cache, 20 more of 3,000 files each, made by a contained command and
 * checkpointed once, kept +33 MB of heap with either keeper unbounded (about 55 MB with both), +3 MB now: both are
 * bounded in entries (50,000 each), least recently captured out (a miss costs a full capture, not a wrong answer).
 * Measured in the server's process (the gateway runs in the test's), with the garbage collector run before each
 * reading, so what is counted is what stays reachable.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bwrapOrSkip } from '../integration/native-harness.ts';
import { createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectStatus, letSandboxReach, runInTurn, tenant } from '../integration/workspace-http.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MB = 1_000_000;
const WORKSPACES = 20;
/** Enough files first to fill every bounded cache a capture feeds (the file stamps keep 100,000). */
const WARM_WORKSPACES = 40;
const FILES = 3_000;
const bwrap = bwrapOrSkip();

function heapAfterGc(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

let gw: RunningGateway;
beforeAll(async () => {
  // On tmpfs: this disk creates about 1,200 files a second, tmpfs twenty times as many (inotify hears both).
  gw = await startGateway({ dataDirMb: 1024 });
  letSandboxReach(gw);
});
afterAll(() => gw?.close());

it.skipIf(!bwrap)("keeps a bounded share of checkpointed workspaces' manifests, however many a member checkpoints", { timeout: 240_000 }, async () => {
  const environmentId = await createEnvironment(gw, tokens.alice);
  const checkpointed = async () => {
    const t = await tenant(gw, tokens.alice, { environmentId });
    const made = await runInTurn(gw, t, `mkdir d && cd d && seq ${FILES} | xargs touch && ls | wc -l`);
    expect(made.output.trim()).toBe(String(FILES));
    await expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/checkpoints`, { token: t.token }), 201);
    await expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { token: t.token, json: {} }), 200);
  };
  // Enough workspaces first to fill every budget (and warm every path), then more: nothing more may stay.
  for (let i = 0; i < WARM_WORKSPACES; i++) await checkpointed();
  const before = heapAfterGc();
  const started = performance.now();
  for (let i = 0; i < WORKSPACES; i++) await checkpointed();
  const kept = heapAfterGc() - before;
  console.log(`${WORKSPACES} more workspaces of ${FILES} files checkpointed in ${((performance.now() - started) / 1000).toFixed(1)} s: +${(kept / MB).toFixed(1)} MB of heap kept`);
  // Unbounded, each manifest stayed (about 1 KB an entry: ~55 MB for these); bounded, the budgets were full already.
  expect(kept).toBeLessThan(10 * MB);
});
