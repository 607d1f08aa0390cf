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
/** How many `/`-separated parts of a path one token may span (a token may contain `/`, base64 may too). */
const MAX_SEGMENTS_PER_TOKEN = 8;
/**
 * The most `=` of one query pair whose prefixes are each looked at: every prefix is decoded and searched, so a pair of
 * n `=` costs n times its length (a 15 KB run of `=` held the event loop a second per request, token or not). A pair
 * with more is hidden whole, unread: nothing in it reaches the log.
 */
const MAX_PAIR_HEADS = 16;

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

function holdsCredential(text: string, isCredential: IsCredential, checked?: Set<string>): boolean {
  // Decoding never lengthens a text: one shorter than a token holds none (most path runs and pairs; no work for them).
  if (text.length < MIN_TOKEN_CHARS) return false;
  for (const form of decodings(text)) {
    // Words split at spaces only (a token may hold `/`, `=`, `:`), and at any punctuation too.
    const words = [form, ...form.split(/\s+/), ...form.split(/[\s"'&,;:=/?#()[\]{}<>]+/)];
    for (const word of words) {
      if (word.length < MIN_TOKEN_CHARS || checked?.has(word)) continue;
      if (isCredential(word) || isCredential(Buffer.from(word, 'base64').toString('utf8'))) return true;
      checked?.add(word); // overlapping runs of a path share their words: each is looked at once
    }
  }
  return false;
}

const isTokenName = (name: string): boolean =>
  decodings(name).some((form) => form.trim().toLowerCase().replace(/\[.*$/, '') === 'token');

/** Path segments with every run of them that holds a credential replaced by one mark (a token may contain `/`). */
function redactSegments(segments: string[], isCredential: IsCredential): string[] {
  const hidden = new Set<number>();
  const checked = new Set<string>();
  // Shortest runs first; a run around one already hidden says nothing more (and would hide its innocent neighbours).
  for (let length = 1; length <= Math.min(segments.length, MAX_SEGMENTS_PER_TOKEN); length++) {
    for (let from = 0, chars = 0; from + length <= segments.length; from++) {
      // `chars`: the run's length joined, kept as the run slides (a run shorter than a token is not even joined).
      if (from === 0) for (let i = 0; i < length; i++) chars += segments[i]!.length + (i > 0 ? 1 : 0);
      else chars += segments[from + length - 1]!.length - segments[from - 1]!.length;
      if (chars < MIN_TOKEN_CHARS) continue;
      const run = segments.slice(from, from + length);
      if (run.some((_, i) => hidden.has(from + i)) || !holdsCredential(run.join('/'), isCredential, checked)) continue;
      for (let i = from; i < from + length; i++) hidden.add(i);
    }
  }
  // A hidden run shows as one mark, so the log does not tell how many `/` the token holds.
  return segments.flatMap((segment, i) => (!hidden.has(i) ? [segment] : hidden.has(i - 1) ? [] : [REDACTED]));
}

/** A query pair and each of its prefixes through an `=`: a token may itself hold `=` (base64 padding). */
const pairHeads = (pair: string): string[] => [pair, ...[...pair.matchAll(/=/g)].map((match) => pair.slice(0, match.index + 1))];

const countOf = (text: string, char: string): number => {
  let count = 0;
  for (let at = text.indexOf(char); at >= 0; at = text.indexOf(char, at + 1)) count++;
  return count;
};

/** A redactor for URLs as requests send them (`/path?query`); `isCredential` says whether a string is a known token. */
export function urlRedactor(isCredential: IsCredential): (url: string) => string {
  return (url) => {
    const at = url.indexOf('?');
    const path = at < 0 ? url : url.slice(0, at);
    const safePath = redactSegments(path.split('/'), isCredential).join('/');
    if (at < 0) return safePath;
    const safeQuery = url
      .slice(at + 1)
      .split('&')
      .map((pair) => {
        if (countOf(pair, '=') > MAX_PAIR_HEADS) return REDACTED;
        const eq = pair.indexOf('=');
        const name = eq < 0 ? pair : pair.slice(0, eq);
        if (eq >= 0 && (isTokenName(name) || holdsCredential(pair.slice(eq + 1), isCredential))) return `${name}=${REDACTED}`;
        return [name, ...pairHeads(pair)].some((head) => holdsCredential(head, isCredential)) ? REDACTED : pair;
      })
      .join('&');
    return `${safePath}?${safeQuery}`;
  };
}
