/**
 * Text that reaches a tenant (an API answer, a build's recorded error) with the server's paths taken out: a path of
 * the data directory tells an attacker where it lives and how it is laid out, a home directory names the account.
 */

/** Every absolute path (a `/` at the start or after a space, quote or bracket, up to the next one) becomes `<path>`. */
export function withoutAbsolutePaths(text: string): string {
  return text.replace(/(^|[\s'"`(<[])\/[^\s'"`)>\]]*/g, '$1<path>');
}

/** Each occurrence of `dir` (and so of anything below it) becomes `label`. */
export function withoutDir(text: string, dir: string, label: string): string {
  return dir === '' ? text : text.split(dir).join(label);
}
