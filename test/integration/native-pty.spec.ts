/**
 * Native PTY executions: a real terminal (tty, stty size after resize), input through the terminal, complete
 * output in the spool with no client attached, exit status, and cancellation of the terminal's whole session.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { commandEnv } from '../../src/providers/command-env.ts';
import { collect, isLive, nativeFixture, spec, untilExited, type Fixture } from './native-harness.ts';

let fx: Fixture;
beforeEach(() => {
  fx = nativeFixture();
});
afterEach(() => fx.cleanup());

const ptySpec = (command: string[], extra = {}) => spec(command, { pty: { cols: 80, rows: 24 }, env: commandEnv({ pty: true }), ...extra });

async function ptyText(operationId: string): Promise<string> {
  return (await collect(fx.executor, operationId, 'pty')).toString();
}

async function waitForText(operationId: string, text: string): Promise<void> {
  for (let cursor = 0, seen = ''; !seen.includes(text); ) {
    const chunk = await fx.executor.read(operationId, 'pty', cursor);
    seen += chunk.data.toString();
    cursor = chunk.next;
    if (chunk.closed) throw new Error(`pty closed without ${JSON.stringify(text)}: ${JSON.stringify(seen)}`);
    if (chunk.data.length === 0) await fx.executor.waitForChange(operationId, 1000);
  }
}

it('runs the command on a terminal, and stty size follows a resize', async () => {
  const s = ptySpec(['/bin/sh', '-c', 'tty; stty size; read line; stty size']);
  expect(await fx.executor.submit(s)).toMatchObject({ state: 'running' });
  await waitForText(s.operationId, '24 80');
  await fx.executor.resize(s.operationId, 100, 40);
  await fx.executor.writeStdin(s.operationId, Buffer.from('go\n'));
  const text = await ptyText(s.operationId);
  expect(text).toMatch(/^\/dev\/pts\/\d+\r\n24 80\r\n/);
  expect(text).toContain('40 100\r\n');
  expect(await untilExited(fx.executor, s.operationId)).toMatchObject({ exitCode: 0, signal: null });
  expect(await fx.executor.read(s.operationId, 'stdout', 0)).toMatchObject({ closed: true, next: 0 });
});

it('keeps the whole output in the spool while no client reads', async () => {
  const s = ptySpec(['/bin/sh', '-c', 'seq 1 20000; exit 5']);
  await fx.executor.submit(s);
  const receipt = await untilExited(fx.executor, s.operationId);
  expect(receipt).toMatchObject({ exitCode: 5 });
  const lines = (await ptyText(s.operationId)).split('\r\n');
  expect(lines.slice(0, 3)).toEqual(['1', '2', '3']);
  expect(lines.at(-2)).toBe('20000');
  expect(receipt.sizes?.pty).toBe(Buffer.byteLength(lines.join('\r\n')));
});

it('takes input through the terminal, Ctrl-D included', async () => {
  const s = ptySpec(['cat']);
  await fx.executor.submit(s);
  await fx.executor.writeStdin(s.operationId, Buffer.from('hello pty\n'));
  await waitForText(s.operationId, 'hello pty\r\nhello pty\r\n'); // the terminal echo, then cat's copy
  await fx.executor.endStdin(s.operationId);
  expect(await untilExited(fx.executor, s.operationId)).toMatchObject({ exitCode: 0 });
});

it('cancel ends every process of the terminal session', async () => {
  const s = ptySpec(['/bin/sh', '-c', 'sleep 1000 & sleep 1000; wait']);
  await fx.executor.submit(s);
  const { pid } = await fx.executor.status(s.operationId);
  const receipt = await fx.executor.cancel(s.operationId);
  expect(receipt).toMatchObject({ state: 'exited', cancelled: true });
  expect(isLive(pid!)).toBe(false);
  expect(sessionMembers(pid!)).toEqual([]);
});

it('a PTY timeout says timedOut', async () => {
  const s = ptySpec(['sleep', '1000'], { timeoutMs: 200 });
  await fx.executor.submit(s);
  expect(await untilExited(fx.executor, s.operationId)).toMatchObject({ timedOut: true, signal: 'SIGTERM' });
});

function sessionMembers(sid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[3]) === sid && fields[0] !== 'Z') members.push(Number(name));
    } catch {
      // gone
    }
  }
  return members;
}
