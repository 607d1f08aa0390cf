import { describe, expect, it } from 'vitest';
import { outputEventIdSchema, outputQuery, submitExecutionBody } from '../../../schemas/api.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import { parseOrReject } from '../../../schemas/parse-input.ts';

describe('API schemas', () => {
  it('should require exactly one of environment or session in a submit', () => {
    const base = { operationId: 'op', command: 'true' };
    expect(submitExecutionBody.safeParse({ ...base, environment: 'henv_1' }).success).toBe(true);
    expect(submitExecutionBody.safeParse({ ...base, session: 's1' }).success).toBe(true);
    expect(submitExecutionBody.safeParse(base).success).toBe(false);
    expect(submitExecutionBody.safeParse({ ...base, environment: 'e', session: 's' }).success).toBe(false);
  });

  it('should parse cursors as non-negative safe integers only', () => {
    expect(outputQuery.parse({})).toEqual({ stream: 'stdout', cursor: 0 });
    expect(outputQuery.parse({ stream: 'pty', cursor: '42' })).toEqual({ stream: 'pty', cursor: 42 });
    for (const cursor of ['-1', '1.5', '1e3', '', ' 1', '0x10', '99999999999999999']) {
      expect(outputQuery.safeParse({ cursor }).success, cursor).toBe(false);
    }
    expect(outputEventIdSchema.parse('stderr:17')).toEqual({ stream: 'stderr', cursor: 17 });
    expect(outputEventIdSchema.safeParse('stdin:1').success).toBe(false);
  });

  it('should turn zod issues into invalid_request with paths and messages but not the input', () => {
    const secret = 'x'.repeat(70_000);
    const error = (() => {
      try {
        parseOrReject(submitExecutionBody, { operationId: 'op', environment: 'e', command: secret, bogus: secret }, 'body');
      } catch (e) {
        return e;
      }
    })();
    expect(isBerthError(error, 'invalid_request')).toBe(true);
    const detail = (error as { detail: { part: string; issues: { path: string }[] } }).detail;
    expect(detail.part).toBe('body');
    expect(detail.issues.map((i) => i.path)).toEqual(expect.arrayContaining(['command', '']));
    expect(JSON.stringify(detail).length).toBeLessThan(2000);
  });
});
