/**
 * A member filling the data directory's filesystem cannot stop the event store for everyone: on a real 64 MiB tmpfs
 * data directory with a 24 MiB reserve, alice's shell command in her turn writes 1 MiB every 50 ms (it would fill the
 * filesystem in about 3 s). Once the free space is under the reserve her command is stopped (cancelled, failure
 * `storage_full`), her next write and her next command are refused with `storage_full` (507) before anything runs,
 * bob's too, while the store keeps room and takes the admin's writes; her delete of the file and her turn's release
 * still go, and once the space is back her writes are taken again. Without the reserve the command filled the
 * filesystem to its last byte and every writer, the store included, met ENOSPC. Uploads admitted while there was room
 * (eight at once, twice what the filesystem holds) stop at the reserve too, each looking before every batch it writes,
 * and so do content file uploads and archive imports (room-check.ts: a look before every MiB written), and git imports
 * (a look before each git step, and every 100 ms while git writes), and a checkpoint's capture (a look before every
 * 4 MiB of its pack: a checkpoint copies what changed into the data directory). A member's
 * build is stopped too: its setup.sh writing without end once filled the filesystem to its last byte, the reserve
 * notwithstanding, until the build step's timeout.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectStatus, q, runInTurn, submitInTurn, tenant, type Answer, type Tenant } from '../integration/workspace-http.ts';
import { craftTar } from '../unit/content/crafted-tar.ts';
import { defaultRolePolicy } from '../../src/runtime/role-policy.ts';

const MiB = 1024 * 1024;
const RESERVE_MB = 24;

let gw: RunningGateway;
let alice: Tenant;
let bob: Tenant;
const free = () => {
  const fs = statfsSync(gw.dataDir);
  return fs.bavail * fs.bsize;
};

let repo: string;

beforeAll(async () => {
  // A repository of 36 MiB that does not compress: its clone and its checkout are each more than the room left.
  repo = mkdtempSync(join(tmpdir(), 'berth-reserve-repo-'));
  for (let i = 0; i < 3; i++) writeFileSync(join(repo, `blob-${i}.bin`), randomBytes(12 * MiB));
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@e', '-c', 'user.name=t', ...args], { cwd: repo });
  git('init', '-q', '-b', 'main');
  git('add', '.');
  git('commit', '-qm', 'big');
  process.env.BERTH_GIT_ALLOW_LOCAL = '1'; // this file's worker only: the in-process server reads it at start
  gw = await startGateway({ dataDirMb: 64, policy: { ...defaultRolePolicy, diskReserveMb: RESERVE_MB } });
  alice = await tenant(gw, tokens.alice, { environmentId: await createEnvironment(gw, tokens.alice) });
  bob = await tenant(gw, tokens.bob);
}, 60_000);
afterAll(async () => {
  await gw?.close();
  rmSync(repo, { recursive: true, force: true });
  delete process.env.BERTH_GIT_ALLOW_LOCAL;
});
// Each case starts with the space an earlier one filled given back, and seen so: the server looks at the free space at
// most every 250 ms, and a look from before the delete still refused the next case's first write (CI, 1 run in 2).
beforeEach(async () => {
  expect(free(), 'free space when the case starts').toBeGreaterThan(RESERVE_MB * MiB + 16 * MiB);
  await new Promise((r) => setTimeout(r, 300));
});

describe('the data directory reserve', () => {
  it("stops a member's command filling the disk, refuses members' writes until space is back, and keeps the store's room", { timeout: 120_000 }, async () => {
    expect(free()).toBeGreaterThan(RESERVE_MB * MiB);
    const filler = 'i=0; while [ $i -lt 64 ]; do head -c 1048576 /dev/zero >> fill.bin || exit 9; i=$((i+1)); sleep 0.05; done';
    const ran = await runInTurn(gw, alice, filler);
    expect(ran.status).toBe('cancelled');
    const { items } = { items: await expectStatus(call(gw, 'GET', '/v1/executions?status=cancelled', { token: tokens.alice }), 200) };
    expect(items.at(-1).failure).toMatchObject({ code: 'storage_full' });
    // Stopped at the reserve, not at the end of the filesystem.
    expect(free()).toBeGreaterThan(8 * MiB);

    // Members' writes and commands are refused before anything runs; reads go.
    const refused = await call(gw, 'PUT', `${alice.files}${q('more.bin')}`, { token: tokens.alice, body: Buffer.alloc(MiB) });
    expect(refused.status).toBe(507);
    expect(refused.json.error).toMatchObject({ code: 'storage_full', detail: { reserveBytes: RESERVE_MB * MiB } });
    expect((await submitInTurn(gw, alice, 'echo ran > ran.txt')).status).toBe(507);
    expect((await call(gw, 'PUT', `${bob.files}${q('b.bin')}`, { token: tokens.bob, body: 'b' })).status).toBe(507);
    expect((await call(gw, 'POST', '/v1/workspaces', { token: tokens.bob, json: { name: 'another' } })).status).toBe(507);
    expect((await call(gw, 'GET', `${alice.files}/list${q('')}`, { token: tokens.alice })).status).toBe(200);
    // The store still has room: the admin's writes are taken.
    await expectStatus(call(gw, 'POST', '/v1/environments', { token: tokens.admin, json: { name: 'admin still writes' } }), 201);

    // Cleaning up goes: the file's delete, then writes are taken again.
    await expectStatus(call(gw, 'DELETE', `${alice.files}${q('fill.bin')}`, { token: tokens.alice }), 200);
    const deadline = Date.now() + 5_000;
    let again = await call(gw, 'PUT', `${alice.files}${q('after.txt')}`, { token: tokens.alice, body: 'back' });
    while (again.status === 507 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      again = await call(gw, 'PUT', `${alice.files}${q('after.txt')}`, { token: tokens.alice, body: 'back' });
    }
    expect(again.status).toBe(200);
    expect((await runInTurn(gw, alice, 'cat after.txt')).output).toBe('back');
  });

  it("stops a member's build filling the disk: failed with storage_full, its version removed", { timeout: 120_000 }, async () => {
    const environment = await createEnvironment(gw, tokens.alice);
    const filler = 'i=0; while [ $i -lt 64 ]; do head -c 1048576 /dev/zero >> fill.bin || exit 9; i=$((i+1)); sleep 0.05; done\n';
    await expectStatus(call(gw, 'PUT', `/v1/environments/${environment}/files/setup.sh`, { token: tokens.alice, body: filler }), 200);
    const before = free();
    expect(before).toBeGreaterThan(RESERVE_MB * MiB + 16 * MiB);
    const started = await expectStatus(call(gw, 'POST', `/v1/environments/${environment}/build`, { token: tokens.alice }), 202);
    let least = before;
    const sampler = setInterval(() => (least = Math.min(least, free())), 2);
    let record: any;
    try {
      const deadline = Date.now() + 60_000;
      do {
        await new Promise((r) => setTimeout(r, 100));
        record = await expectStatus(call(gw, 'GET', `/v1/environments/${environment}/builds/${started.version}`, { token: tokens.alice }), 200);
      } while (record.status === 'building' && Date.now() < deadline);
    } finally {
      clearInterval(sampler);
    }
    expect(record.status, JSON.stringify(record)).toBe('failed');
    expect(record.error).toMatch(/^storage_full: .*reserve of 24 MiB/);
    expect(least, `free went down to ${least} bytes`).toBeGreaterThan(8 * MiB);
    // The stopped build's version is removed: the space is back, and a member's writes are taken again.
    expect(free()).toBeGreaterThan(before - 2 * MiB);
    const deadline = Date.now() + 5_000;
    let again = await call(gw, 'PUT', `/v1/environments/${environment}/files/after.txt`, { token: tokens.alice, body: 'back' });
    while (again.status === 507 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      again = await call(gw, 'PUT', `/v1/environments/${environment}/files/after.txt`, { token: tokens.alice, body: 'back' });
    }
    expect(again.status).toBe(200);
  });

  it("fails a checkpoint whose capture would take the filesystem under the reserve, and keeps the store's room", { timeout: 120_000 }, async () => {
    // The command leaves a little more than the reserve free; capturing what it wrote would take twice its size.
    const size = Math.floor((free() - RESERVE_MB * MiB) / MiB) - 6;
    expect(size).toBeGreaterThan(10);
    const ran = await runInTurn(gw, alice, `head -c ${size * MiB} /dev/urandom > snapshot.bin`);
    expect(ran.status, ran.output).toBe('exited');
    let least = free();
    const sampler = setInterval(() => (least = Math.min(least, free())), 2);
    let answer: Answer;
    try {
      answer = await call(gw, 'POST', `/v1/sessions/${alice.session}/turns/${alice.turn}/checkpoints`, { token: tokens.alice });
    } finally {
      clearInterval(sampler);
      await expectStatus(call(gw, 'DELETE', `${alice.files}${q('snapshot.bin')}`, { token: tokens.alice }), 200);
    }
    expect({ status: answer.status, code: answer.json.error?.code }, answer.text).toEqual({ status: 507, code: 'storage_full' });
    // At most a pack buffer (4 MiB) past the reserve.
    expect(least, `free went down to ${least} bytes`).toBeGreaterThan(RESERVE_MB * MiB - 6 * MiB);
    const deadline = Date.now() + 5_000;
    let again = await call(gw, 'POST', `/v1/sessions/${alice.session}/turns/${alice.turn}/checkpoints`, { token: tokens.alice });
    while (again.status === 507 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      again = await call(gw, 'POST', `/v1/sessions/${alice.session}/turns/${alice.turn}/checkpoints`, { token: tokens.alice });
    }
    expect(again.status, again.text).toBe(201);
  });

  it("stops content file uploads and archive imports under way at the reserve, and the environment's delete frees it", { timeout: 120_000 }, async () => {
    const environment = await createEnvironment(gw, tokens.alice);
    const before = free();
    expect(before).toBeGreaterThan(RESERVE_MB * MiB + 16 * MiB);
    // Four file uploads and one tar import, admitted while there is room, together twice what the filesystem holds.
    const size = Math.ceil(before / 4 / MiB) * MiB;
    const tar = craftTar(Array.from({ length: 4 }, (_, i) => ({ name: `big-${i}.bin`, content: Buffer.alloc(size / 2, i) })));
    let least = before;
    const sampler = setInterval(() => (least = Math.min(least, free())), 2);
    let answers: Answer[];
    try {
      answers = await Promise.all([
        ...Array.from({ length: 4 }, (_, i) =>
          call(gw, 'PUT', `/v1/environments/${environment}/files/up-${i}.bin`, { token: tokens.alice, body: Buffer.alloc(size, i) }),
        ),
        call(gw, 'POST', `/v1/environments/${environment}/import`, { token: tokens.alice, body: tar, headers: { 'content-type': 'application/x-tar' } }),
      ]);
    } finally {
      clearInterval(sampler);
    }
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused.length).toBeGreaterThan(0);
    for (const a of refused) expect({ status: a.status, code: a.json.error.code }).toEqual({ status: 507, code: 'storage_full' });
    // At most a MiB per write past the reserve (the sampler sees the staged copies too).
    expect(least, `free went down to ${least} bytes`).toBeGreaterThan(RESERVE_MB * MiB - 8 * MiB);
    await expectStatus(call(gw, 'POST', '/v1/environments', { token: tokens.admin, json: { name: 'room kept' } }), 201);
    // Deleting the environment removes its content: the space is back for the next writer.
    await expectStatus(call(gw, 'DELETE', `/v1/environments/${environment}`, { token: tokens.alice }), 204);
    expect(free()).toBeGreaterThan(RESERVE_MB * MiB + 16 * MiB);
  });

  it("stops a git import at the reserve: its clone's pack and its checkout are git's own writes", { timeout: 120_000 }, async () => {
    const environment = await createEnvironment(gw, tokens.alice);
    const before = free();
    expect(before).toBeGreaterThan(RESERVE_MB * MiB + 16 * MiB);
    let least = before;
    const sampler = setInterval(() => (least = Math.min(least, free())), 2);
    let answer: Answer;
    try {
      answer = await call(gw, 'POST', `/v1/environments/${environment}/import`, { token: tokens.alice, json: { git: { url: `file://${repo}` } } });
    } finally {
      clearInterval(sampler);
    }
    expect({ status: answer.status, code: answer.json.error?.code }, `${answer.text} least ${least}`).toEqual({ status: 507, code: 'storage_full' });
    expect(least, `free went down to ${least} bytes`).toBeGreaterThan(8 * MiB);
    // What git wrote is removed with its staging: the space is back.
    expect(free()).toBeGreaterThan(before - 2 * MiB);
    await expectStatus(call(gw, 'DELETE', `/v1/environments/${environment}`, { token: tokens.alice }), 204);
  });

  it('stops uploads under way at the reserve, however many a member starts at once', { timeout: 120_000 }, async () => {
    const before = free();
    expect(before).toBeGreaterThan(RESERVE_MB * MiB + 16 * MiB);
    // Each upload is admitted while there is room; together they are twice what the filesystem holds.
    const UPLOADS = 8;
    const size = Math.ceil((2 * before) / UPLOADS / MiB) * MiB;
    let least = before;
    const sampler = setInterval(() => (least = Math.min(least, free())), 2);
    let answers: { status: number; code?: string }[];
    try {
      answers = await Promise.all(
        Array.from({ length: UPLOADS }, async (_, i) => {
          const a = await call(gw, 'PUT', `${alice.files}${q(`up-${i}.bin`)}`, { token: tokens.alice, body: Buffer.alloc(size, i) });
          return { status: a.status, ...(a.status === 200 ? {} : { code: a.json.error.code }) };
        }),
      );
    } finally {
      clearInterval(sampler);
    }
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused.length).toBeGreaterThan(0);
    for (const a of refused) expect(a).toEqual({ status: 507, code: 'storage_full' });
    // At most a batch (1 MiB) per upload past the reserve: the store keeps its room.
    expect(least, `free went down to ${least} bytes`).toBeGreaterThan(RESERVE_MB * MiB - (UPLOADS + 2) * MiB);
    await expectStatus(call(gw, 'POST', '/v1/environments', { token: tokens.admin, json: { name: 'still room' } }), 201);
    await expectStatus(call(gw, 'POST', `/v1/sessions/${alice.session}/turns/${alice.turn}/release`, { token: tokens.alice, json: {} }), 200);
  });
});
