/**
 * Tool turns through the runtime API on managed workspaces. (1) Turn acquire+release p50 (openTurn then releaseTurn,
 * one storage, sequential) against a raw pair of single-row SQLite commits (WAL, synchronous=FULL, as the event store
 * commits) on the same disk; the target is absolute, p50 <= 5 ms, so the figure's ratio bound is 5 ms over
 * the baseline measured in this run. (2) 100 turns on 100 storages at once against the same 100 one after another
 * (each: open, write a 4 KiB file, release), in turns per second: at least 3x, the store's group commit at work.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { caller } from './bench-gateway.ts';
import { figure, median } from './figure.ts';
import { startWorkspaceBed } from './workspace-bed.ts';

const TURN_TARGET_MS = 5;
const TURN_RUNS = Number(process.env.BENCH_RUNS ?? 200);
const STORAGES = 100;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const WARMUP = 10;

const bed = await startWorkspaceBed();
const { api } = bed.berth;
const raw = new Database(join(bed.rawDir, 'raw.sqlite3'));
try {
  raw.pragma('journal_mode = WAL');
  raw.pragma('synchronous = FULL');
  raw.exec('CREATE TABLE events (position INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, revision INTEGER NOT NULL, data TEXT NOT NULL)');
  const insert = raw.prepare('INSERT INTO events (stream, revision, data) VALUES (?, ?, ?)');
  const data = JSON.stringify({ holder: 'htrn_' + '0'.repeat(32), sessionId: 'hses_x', workspaceId: 'hws_x', scope: 'default', at: Date.now() });

  const sessions = await bed.sessions(STORAGES);
  const one = sessions[0]!;
  const turnMs: number[] = [];
  const rawMs: number[] = [];
  for (let i = 0; i < WARMUP + TURN_RUNS; i++) {
    let started = performance.now();
    const turn = await api.openTurn(caller, one);
    await api.releaseTurn(caller, one, turn.id);
    const t = performance.now() - started;
    started = performance.now();
    insert.run('raw', 2 * i, data); // each statement is its own transaction: two commits, as acquire and release
    insert.run('raw', 2 * i + 1, data);
    const r = performance.now() - started;
    if (i >= WARMUP) {
      turnMs.push(t);
      rawMs.push(r);
    }
  }
  const turnP50 = median(turnMs);
  const rawP50 = median(rawMs);
  console.error(`turns: acquire+release p50 ${turnP50.toFixed(3)} ms vs raw SQLite insert+commit pair ${rawP50.toFixed(3)} ms over ${TURN_RUNS} runs`);
  figure('turn-acquire-release-p50', turnP50, 'ms', rawP50, { op: '<=', ratio: Number((TURN_TARGET_MS / rawP50).toFixed(3)) });

  const file = randomBytes(4096);
  const turnWithWrite = async (session: string, n: number) => {
    const turn = await api.openTurn(caller, session);
    await api.files.write(caller, session, turn.id, `f-${n}.bin`, file);
    await api.releaseTurn(caller, session, turn.id);
  };
  const perSecond = async (run: () => Promise<unknown>) => {
    const started = performance.now();
    await run();
    return STORAGES / ((performance.now() - started) / 1000);
  };
  const sequential: number[] = [];
  const concurrent: number[] = [];
  for (let round = 0; round < ROUNDS + 1; round++) {
    const seq = await perSecond(async () => {
      for (const s of sessions) await turnWithWrite(s, round);
    });
    const conc = await perSecond(() => Promise.all(sessions.map((s) => turnWithWrite(s, round))));
    if (round === 0) continue; // warm-up
    sequential.push(seq);
    concurrent.push(conc);
  }
  console.error(
    `turns: ${STORAGES} turns on ${STORAGES} storages, ${ROUNDS} rounds: concurrent ${concurrent.map((x) => x.toFixed(0)).join('/')} turns/s, ` +
      `sequential ${sequential.map((x) => x.toFixed(0)).join('/')} turns/s`,
  );
  figure('turns-100-storages-concurrent', median(concurrent), 'turns/s', median(sequential), { op: '>=', ratio: 3 });
} finally {
  raw.close();
  await bed.close();
}
