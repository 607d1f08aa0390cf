/**
 * What a logged URL may show: no value of a parameter named `token` in any spelling, and no known token anywhere in
 * the path or query, in clear, percent-encoded (once or more) or base64; everything else left as sent. Also the
 * literal-name query token reader auth uses.
 */
import { describe, expect, it } from 'vitest';
import { rawQueryParameter } from '../../../src/gateway/raw-query.ts';
import { urlRedactor } from '../../../src/gateway/url-redaction.ts';

const secret = 'Tk-5f2a7d9b0436c8e1+/=';
const redact = urlRedactor((value) => value === secret);
const percentAll = (text: string) => [...Buffer.from(text)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

describe('urlRedactor', () => {
  it('should hide the value of a parameter whose decoded name is token, in any case, encoding or array form', () => {
    for (const name of ['token', 'TOKEN', 'Token', 'tok%65n', '%74oken', '%2574oken', 'token[]', 'token%5B0%5D', 'token+']) {
      expect(redact(`/v1/events?after=3&${name}=anything-at-all`)).toBe(`/v1/events?after=3&${name}=[redacted]`);
    }
  });

  it('should hide a known token wherever it is and however it is encoded', () => {
    const forms = [secret, encodeURIComponent(secret), percentAll(secret), encodeURIComponent(percentAll(secret)), Buffer.from(secret).toString('base64url')];
    for (const form of forms) {
      expect(redact(`/v1/executions/${form}/output`)).toBe('/v1/executions/[redacted]/output');
      expect(redact(`/v1/executions?x=${form}&status=running`)).toBe('/v1/executions?x=[redacted]&status=running');
      expect(redact(`/v1/executions?${form}`)).toBe('/v1/executions?[redacted]');
      expect(redact(`/v1/executions?${form}=1`)).toBe('/v1/executions?[redacted]');
    }
    expect(redact(`/v1/executions?q=Bearer%20${encodeURIComponent(secret)}`)).toBe('/v1/executions?q=[redacted]');
  });

  it('should leave everything else as sent, malformed escapes included', () => {
    for (const url of ['/v1/executions/ex_1/events?stdout=10&stream=stdout', '/healthz', '/v1/x?a=%zz&b=%E2%82', '/v1/executions?tokens=1']) {
      expect(redact(url)).toBe(url);
    }
  });
});

describe('rawQueryParameter', () => {
  it('should read only the literal name, decode the value, and refuse a name given twice', () => {
    expect(rawQueryParameter(`/v1/events?after=1&token=${encodeURIComponent(secret)}`, 'token')).toBe(secret);
    expect(rawQueryParameter('/v1/events?token=a+b%2B', 'token')).toBe('a b+');
    for (const query of ['tok%65n=x', '%74oken=x', 'TOKEN=x', 'token[]=x', 'tokens=x', 'token=x&token=x', 'token=%zz', '']) {
      expect([query, rawQueryParameter(`/v1/events?${query}`, 'token')]).toEqual([query, undefined]);
    }
    expect(rawQueryParameter('/v1/events', 'token')).toBeUndefined();
  });
});
