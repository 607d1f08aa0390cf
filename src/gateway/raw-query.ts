/**
 * One query parameter read from a request's raw URL by its literal name. Names are compared as sent, never
 * percent-decoded, so `tok%65n`, `%74oken` or `TOKEN` are not `token` (a credential must arrive under exactly the name
 * the logs know to hide); the value is percent-decoded as a query value is (`+` is a space).
 */

/** The decoded value of `name`; undefined when it is absent, given more than once (ambiguous) or not decodable. */
export function rawQueryParameter(url: string, name: string): string | undefined {
  const query = url.indexOf('?') < 0 ? '' : url.slice(url.indexOf('?') + 1).split('#')[0]!;
  const values = query
    .split('&')
    .filter((pair) => pair === name || pair.startsWith(`${name}=`))
    .map((pair) => pair.slice(name.length + 1));
  if (values.length !== 1) return undefined;
  try {
    return decodeURIComponent(values[0]!.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}
