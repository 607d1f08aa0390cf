/**
 * What a logged URL may show: a request's path and query with every credential taken out. A query parameter whose
 * decoded name is `token` (in any case, encoding or `token[]` form) has its value replaced, and so has any path
 * segment, name or value that decodes, percent-decoded once or several times or read as base64, to a token the server
 * knows. Matching the known tokens themselves catches what no list of names would (a token in the path, under another
 * name, in a rejected request).
 */

const REDACTED = '[redacted]';
/** Shortest token the gateway accepts (auth.ts `tokenEntrySchema`); shorter words are never checked. */
const MIN_TOKEN_CHARS = 16;
const MAX_DECODINGS = 4;

export type IsCredential = (value: string) => boolean;

/** Percent-decodes runs of `%XX` as UTF-8, leaving malformed escapes as they are (never throws). */
const percentDecode = (text: string): string =>
  text.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8'));

/** `text` and each of its successive decodings (`+` as a space, as in a query), until nothing changes. */
function decodings(text: string): string[] {
  const forms = [text];
  for (let i = 0; i < MAX_DECODINGS; i++) {
    const next = percentDecode(forms.at(-1)!.replaceAll('+', ' '));
    if (next === forms.at(-1)) break;
    forms.push(next);
  }
  return forms;
}

function holdsCredential(text: string, isCredential: IsCredential): boolean {
  for (const form of decodings(text)) {
    const words = [form, ...form.split(/[\s"'&,;:=/?#()[\]{}<>]+/)];
    for (const word of words) {
      if (word.length < MIN_TOKEN_CHARS) continue;
      if (isCredential(word) || isCredential(Buffer.from(word, 'base64').toString('utf8'))) return true;
    }
  }
  return false;
}

const isTokenName = (name: string): boolean =>
  decodings(name).some((form) => form.trim().toLowerCase().replace(/\[.*$/, '') === 'token');

/** A redactor for URLs as requests send them (`/path?query`); `isCredential` says whether a string is a known token. */
export function urlRedactor(isCredential: IsCredential): (url: string) => string {
  return (url) => {
    const at = url.indexOf('?');
    const path = at < 0 ? url : url.slice(0, at);
    const safePath = path
      .split('/')
      .map((segment) => (holdsCredential(segment, isCredential) ? REDACTED : segment))
      .join('/');
    if (at < 0) return safePath;
    const safeQuery = url
      .slice(at + 1)
      .split('&')
      .map((pair) => {
        const eq = pair.indexOf('=');
        const name = eq < 0 ? pair : pair.slice(0, eq);
        if (holdsCredential(name, isCredential)) return REDACTED;
        if (eq < 0) return pair;
        return isTokenName(name) || holdsCredential(pair.slice(eq + 1), isCredential) ? `${name}=${REDACTED}` : pair;
      })
      .join('&');
    return `${safePath}?${safeQuery}`;
  };
}
