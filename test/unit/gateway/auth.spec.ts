import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../../schemas/errors.ts';
import { bearerToken, createTokenAuth, loadTokensFile } from '../../../src/gateway/auth.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-auth-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('token auth', () => {
  it('should map the admin token and file tokens to their callers, and nothing else', async () => {
    const file = join(dir, 'tokens.json');
    writeFileSync(file, JSON.stringify([{ token: 'member-token-0123456789', scope: 'team-a', role: 'member' }]));
    const auth = createTokenAuth({ adminToken: 'admin', tokens: await loadTokensFile(file) });
    expect(auth.authenticate('admin')).toEqual({ scope: 'default', role: 'admin' });
    expect(auth.authenticate('member-token-0123456789')).toEqual({ scope: 'team-a', role: 'member' });
    expect(auth.authenticate('member-token-012345678')).toBeUndefined();
    expect(auth.authenticate(undefined)).toBeUndefined();
    expect(auth.authenticate('')).toBeUndefined();
  });

  it('should refuse a malformed tokens file without quoting its secrets', async () => {
    const file = join(dir, 'tokens.json');
    writeFileSync(file, JSON.stringify([{ token: 'short', scope: 'a', role: 'root' }]));
    const error = await loadTokensFile(file).catch((e: unknown) => e);
    expect(isBerthError(error, 'invalid_request')).toBe(true);
    expect(JSON.stringify((error as Error).message) + JSON.stringify((error as { detail: unknown }).detail)).not.toContain('short');
    writeFileSync(file, '{not json');
    expect(isBerthError(await loadTokensFile(file).catch((e: unknown) => e), 'invalid_request')).toBe(true);
  });

  it('should refuse one token configured for two different callers', () => {
    const token = 'same-token-0123456789';
    expect(() =>
      createTokenAuth({ tokens: [{ token, scope: 'a', role: 'member' }, { token, scope: 'b', role: 'member' }] }),
    ).toThrow(/twice/);
  });

  it('should read only well-formed bearer headers', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer   abc ')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeUndefined();
    expect(bearerToken('Bearer a b')).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});
