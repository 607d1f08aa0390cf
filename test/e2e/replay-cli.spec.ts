/**
 * `berth replay` by a bare resource id and by `--operation OPID`, over HTTP against a real `berth serve` child and
 * locally (its data directory once it stopped): the same steps as by the stream name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamOfTarget } from '../../src/cli/replay-target.ts';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;
let environmentId: string;
let execution: { id: string; operationId: string };

beforeAll(async () => {
  server = await startServer();
  environmentId = await createEnvironment(server, tokens.alice);
  execution = await submit(server, environmentId, ['echo', 'replayed'], {}, tokens.alice);
  await finished(server, execution.id, tokens.alice);
});
afterAll(() => server?.close());

const remote = cleanEnv({ BERTH_TOKEN: tokens.alice });
const replay = (args: string[], env = remote) => berth(['replay', '--json', ...args], env);
/** The steps of a successful replay, as parsed JSON lines. */
function steps(run: Awaited<ReturnType<typeof berth>>, what: string) {
  expect(run.code, `${what}: ${run.stderr}`).toBe(0);
  return run.stdout.trim().split('\n').map((line) => JSON.parse(line));
}

describe('berth replay by id and by operationId', () => {
  it('over HTTP gives the same steps for the stream name, the bare execution id and --operation', async () => {
    const url = ['--url', server.url];
    const [byStream, byId, byOperation, byEnvironmentId, unknown, both] = await Promise.all([
      replay([`execution-${execution.id}`, ...url]),
      replay([execution.id, ...url]),
      replay(['--operation', execution.operationId, ...url]),
      replay([environmentId, ...url]),
      replay(['--operation', 'no-such-operation', ...url]),
      replay([execution.id, '--operation', execution.operationId, ...url]),
    ]);
    const expected = steps(byStream, 'by stream');
    expect(expected.length).toBeGreaterThan(1);
    expect(expected.every((s) => s.stream === `execution-${execution.id}`)).toBe(true);
    expect(steps(byId, 'by id')).toEqual(expected);
    expect(steps(byOperation, 'by operation')).toEqual(expected);
    expect(steps(byEnvironmentId, 'by environment id')[0]).toMatchObject({ stream: `environment-${environmentId}`, revision: 0 });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/No execution has the operationId no-such-operation/);
    expect(both.code).toBe(2);
  });

  it('prints the same lines, context diffs included, over HTTP and in this process (human and --json)', async () => {
    const stream = `execution-${execution.id}`;
    const forms = (args: string[], env: NodeJS.ProcessEnv) => Promise.all([berth(['replay', stream, ...args], env), berth(['replay', '--json', stream, ...args], env)]);
    const overHttp = await forms(['--url', server.url], remote);
    // A second server on a copy of the data directory is not needed: the same directory is read once this one stopped.
    expect(await server.stop('SIGTERM')).toBe(0);
    const inProcess = await forms(['--data-dir', server.dataDir], cleanEnv());
    for (const run of [...overHttp, ...inProcess]) expect(run.code, run.stderr).toBe(0);
    expect(inProcess[0].stdout).toBe(overHttp[0].stdout);
    expect(inProcess[1].stdout).toBe(overHttp[1].stdout);
    // The context keys each event changed are there in both forms: the human line and the JSON field.
    const json = overHttp[1].stdout.trim().split('\n').map((line) => JSON.parse(line));
    const [key, change] = Object.entries(json.find((step) => Object.keys(step.contextDiff ?? {}).length > 0)!.contextDiff)[0] as [string, { before: unknown; after: unknown }];
    expect(overHttp[0].stdout).toContain(`\n    ${key}: ${JSON.stringify(change.before)} -> ${JSON.stringify(change.after)}`);
  }, 180_000);

  it('on the data directory gives the same steps for the stream name, the bare execution id and --operation --scope', async () => {
    // While the server holds the data directory the CLI talks to it: the case before stopped it.
    const local = ['--data-dir', server.dataDir];
    const env = cleanEnv();
    const [byStream, byId, byOperation, otherScope] = await Promise.all([
      replay([`execution-${execution.id}`, ...local], env),
      replay([execution.id, ...local], env),
      replay(['--operation', execution.operationId, '--scope', 'alice', ...local], env),
      replay(['--operation', execution.operationId, ...local], env), // the default scope: another execution id
    ]);
    const expected = steps(byStream, 'by stream');
    expect(expected.length).toBeGreaterThan(1);
    expect(expected[0]).toMatchObject({ stream: `execution-${execution.id}`, stateBefore: expect.anything() });
    expect(steps(byId, 'by id')).toEqual(expected);
    expect(steps(byOperation, 'by operation')).toEqual(expected);
    expect(otherScope.stdout.trim()).toBe('');
  });

  it('maps every id the runtime hands out to its stream, and leaves a stream name alone', () => {
    const hex = 'ab'.repeat(16);
    expect(streamOfTarget(`henv_${hex}`)).toBe(`environment-henv_${hex}`);
    expect(streamOfTarget(`henv_${hex}-3`)).toBe(`build-henv_${hex}-3`);
    expect(streamOfTarget('halloc_1f2e')).toBe('allocation-halloc_1f2e');
    expect(streamOfTarget(`hses_${hex}`)).toBe(`session-hses_${hex}`);
    expect(streamOfTarget(`hhrn_${hex}`)).toBe(`harness-hhrn_${hex}`);
    expect(streamOfTarget(`hwsp_${hex}`)).toBe(`workspace-hwsp_${hex}`);
    expect(streamOfTarget(`htrn_${hex}`)).toBe(`turn-htrn_${hex}`);
    expect(streamOfTarget(`hlse_${hex}`)).toBe(`lease-hlse_${hex}`);
    expect(streamOfTarget(`execution-hexe_${hex}`)).toBe(`execution-hexe_${hex}`);
  });
});
