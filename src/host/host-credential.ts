/**
 * The bearer credential a `berth host` admits calls with: read once from a file only its owner may read, compared
 * in constant time (both sides hashed first, so neither length nor content leaks through timing). The secret itself
 * is never logged, echoed in an error, or passed to a command.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { BerthError } from '../../schemas/errors.ts';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** Reads `file` and answers whether an Authorization header carries its secret. */
export function credentialCheck(file: string): (authorization: string | undefined) => boolean {
  let secret: string;
  try {
    if ((statSync(file).mode & 0o077) !== 0) {
      throw new BerthError('invalid_request', `the credential file ${file} may be read by others: make it mode 0600`, { reason: 'credential_mode', file });
    }
    secret = readFileSync(file, 'utf8').trim();
  } catch (e) {
    if (e instanceof BerthError) throw e;
    throw new BerthError('invalid_request', `cannot read the credential file ${file}: ${(e as Error).message}`, { reason: 'credential_file', file });
  }
  if (secret.length < 16) throw new BerthError('invalid_request', `the credential in ${file} must be at least 16 characters`, { reason: 'credential_short', file });
  const expected = digest(secret);
  return (authorization) => {
    const given = /^Bearer (.+)$/.exec(authorization ?? '')?.[1] ?? '';
    return timingSafeEqual(digest(given), expected);
  };
}
