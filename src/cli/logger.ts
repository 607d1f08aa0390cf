/**
 * The CLI's pino logger: JSON lines on stderr, or one short readable line per entry when stderr is a terminal
 * (a tiny formatter instead of pino-pretty). Secrets are redacted by key wherever they appear.
 */
import { pino, type Logger } from 'pino';

const levels: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const omitted = new Set(['level', 'time', 'msg', 'pid', 'hostname']);

/** Formats one pino JSON line for a terminal: `12:00:01.123 INFO  message key=value …`. */
export function formatForTerminal(line: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  const time = new Date(Number(entry.time)).toISOString().slice(11, 23);
  const level = (levels[Number(entry.level)] ?? String(entry.level)).padEnd(5);
  const fields = Object.entries(entry)
    .filter(([k]) => !omitted.has(k))
    .map(([k, v]) => {
      if (k === 'err' && v && typeof v === 'object') return `err=${JSON.stringify((v as { message?: string }).message)}`;
      return `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`;
    });
  return `${time} ${level} ${entry.msg ?? ''}${fields.length ? ` ${fields.join(' ')}` : ''}\n`;
}

export function createLogger(opts: { level?: string; pretty?: boolean } = {}): Logger {
  const pretty = opts.pretty ?? Boolean(process.stderr.isTTY);
  const destination = pretty
    ? { write: (line: string) => void process.stderr.write(formatForTerminal(line)) }
    : pino.destination({ fd: 2, sync: true });
  return pino(
    {
      level: opts.level ?? process.env.BERTH_LOG_LEVEL ?? 'info',
      base: { pid: process.pid },
      redact: { paths: ['token', '*.token', 'authorization', '*.authorization', '*.headers.authorization'], censor: '[redacted]' },
    },
    destination,
  );
}
