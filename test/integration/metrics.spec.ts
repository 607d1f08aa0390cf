/**
 * `/metrics` by Prometheus conventions, over the real runtime on a real socket after real work (a command, a
 * directory checkpoint, a build): the exposition parses with a Prometheus parser, every family has HELP and TYPE, a
 * conventional name (counters `_total`, histograms in `_seconds` or `_bytes`) and a row in the README's Metrics
 * table, no label value is an id, and the latency histograms have observations.
 */
import { readFileSync } from 'node:fs';
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, startGateway, submit, tokens, type RunningGateway } from './gateway-fixture.ts';
import { call, expectStatus, letSandboxReach, tenant } from './workspace-http.ts';

let gw: RunningGateway;
let text: string;
let families: ParsedFamily[];

/** The README's Metrics section: the table every family must have a row in. */
const readmeTable = (): string[] => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Metrics\n')) ?? '';
  return section.split('\n').filter((l) => l.startsWith('|'));
};

/** Every sample line's labels (the parser folds a labelled histogram's series into one, so these are read raw). */
const sampleLabels = (exposition: string): { line: string; name: string; value: string }[] =>
  exposition
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .flatMap((line) => [...line.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => ({ line, name: m[1], value: m[2] })));

/** The `_count` of a histogram's series whose labels are exactly `labels` (`a="x",b="y"`, in the order exposed). */
const observations = (family: string, labels = ''): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${family}_count${labels ? `{${labels}}` : ''} `));
  return line === undefined ? 0 : Number(line.split(' ').pop());
};

beforeAll(async () => {
  gw = await startGateway();
  letSandboxReach(gw);
  // A command to its end: an allocation made cold, a command started.
  const env = await createEnvironment(gw);
  const accepted = await submit(gw, env, ['true']);
  let status = accepted.status;
  while (!['exited', 'failed', 'unknown', 'cancelled'].includes(status)) {
    status = (await expectStatus(call(gw, 'GET', `/v1/executions/${accepted.id}?waitMs=20000`), 200)).status;
  }
  expect(status).toBe('exited');
  // A build of the environment's (empty) content.
  const build = await expectStatus(call(gw, 'POST', `/v1/environments/${env}/build`), 202);
  let record = build;
  while (record.status === 'building') record = await expectStatus(call(gw, 'GET', `/v1/environments/${env}/builds/${build.version}`), 200);
  expect(record.status).toBe('ready');
  // A checkpoint of a managed workspace's directory, in a turn.
  const t = await tenant(gw, tokens.alice);
  const turn = `/v1/sessions/${t.session}/turns/${t.turn}`;
  await expectStatus(call(gw, 'PUT', `${t.files}?path=a.txt`, { body: 'one\n' }), 200);
  await expectStatus(call(gw, 'POST', `${turn}/checkpoints`), 201);
  await expectStatus(call(gw, 'POST', `${turn}/release`, { json: {} }), 200);
  const answer = await call(gw, 'GET', '/metrics', { token: tokens.admin });
  expect(answer.status).toBe(200);
  text = answer.text;
  families = parsePrometheusTextFormat(text);
}, 180_000);
afterAll(() => gw?.close());

describe('/metrics by Prometheus conventions', () => {
  it('should give every family a HELP sentence and a TYPE, Berth\'s under berth_ and the process\'s under the standard names', () => {
    expect(families.length).toBeGreaterThan(10);
    for (const f of families) {
      expect(f.help, `${f.name} has no HELP`).not.toBe('');
      expect(f.type, `${f.name} has no TYPE`).not.toBe('UNTYPED');
      expect(text, f.name).toMatch(new RegExp(`^# HELP ${f.name} \\S`, 'm'));
      expect(text, f.name).toMatch(new RegExp(`^# TYPE ${f.name} (counter|gauge|histogram|summary)$`, 'm'));
      expect(f.name).toMatch(/^(berth|process|nodejs)_[a-z0-9_]+$/);
    }
    // One family per name: a second registration would have been refused, a second exposition would repeat it.
    expect(new Set(families.map((f) => f.name)).size).toBe(families.length);
  });

  it('should name counters _total, histograms in seconds or bytes, and none of Berth\'s gauges _total', () => {
    for (const f of families) {
      if (f.type === 'COUNTER') expect(f.name).toMatch(/_total$/);
      // prom-client's standard nodejs_active_*_total are gauges by that name; Berth's own follow the rule.
      else if (f.name.startsWith('berth_')) expect(f.name).not.toMatch(/_total$/);
      if (f.type === 'HISTOGRAM') expect(f.name).toMatch(/_(seconds|bytes)$/);
    }
    const byName = new Map(families.map((f) => [f.name, f.type]));
    for (const name of ['berth_allocate_seconds', 'berth_command_start_seconds', 'berth_checkpoint_seconds', 'berth_build_seconds', 'berth_event_store_append_seconds']) {
      expect(byName.get(name), name).toBe('HISTOGRAM');
    }
    expect(byName.get('berth_lease_resumes_total')).toBe('COUNTER');
    for (const name of ['berth_allocations', 'berth_executions', 'berth_leases_paused', 'berth_projection_lag_events']) expect(byName.get(name), name).toBe('GAUGE');
  });

  it('should carry no id in any label value', () => {
    const labels = sampleLabels(text);
    expect(labels.length).toBeGreaterThan(20);
    for (const { line, value } of labels) {
      expect(value, line).not.toMatch(/^h[a-z]{2,4}_[0-9a-z]{6,}/); // hexe_, henv_, hses_, hwsp_, hpool_, …
      expect(value, line).not.toMatch(/[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}/i); // uuids
      expect(value, line).not.toMatch(/[0-9a-f]{16}/i); // digests, long hex
    }
    // The states and statuses are there as values (the check above looked at real labels).
    expect(text).toMatch(/^berth_executions\{status="exited"\} [1-9]/m);
    expect(text).toMatch(/^berth_allocations\{state="ready"\} [1-9]/m);
  });

  it('should list every family in the README\'s Metrics table', () => {
    const rows = readmeTable();
    expect(rows.length).toBeGreaterThan(2);
    const missing = families.map((f) => f.name).filter((name) => !rows.some((row) => row.includes(`\`${name}\``)));
    expect(missing).toEqual([]);
  });

  it('should have observed the allocation, the command start, the build, the checkpoint and the appends', () => {
    expect(observations('berth_allocate_seconds', 'start="cold"')).toBeGreaterThanOrEqual(1);
    expect(observations('berth_command_start_seconds')).toBeGreaterThanOrEqual(1);
    expect(observations('berth_build_seconds', 'result="succeeded"')).toBeGreaterThanOrEqual(1);
    expect(observations('berth_event_store_append_seconds')).toBeGreaterThan(5);
    expect(observations('berth_checkpoint_seconds', 'view="directory",result="published"')).toBe(1);
    // A warm claim is the pools' to observe: the series is there at zero until one is.
    expect(text).toMatch(/^berth_allocate_seconds_count\{start="warm"\} 0$/m);
  });
});
