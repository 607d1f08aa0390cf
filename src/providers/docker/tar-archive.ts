/**
 * A minimal ustar writer: the Docker archive API (putArchive) takes a tar, and Berth needs exact owners and modes on
 * the few entries it puts into an allocation's spool volume (a uid 1000 spool directory, a root-owned read-only
 * supervisor), which no host-side file layout can give without root.
 */
export interface TarEntry {
  /** Relative path, at most 100 bytes. Directories end without a slash. */
  path: string;
  type: 'file' | 'directory';
  mode: number;
  uid: number;
  gid: number;
  content?: Buffer;
}

const BLOCK = 512;

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(entry: TarEntry, size: number): Buffer {
  const name = entry.type === 'directory' ? `${entry.path}/` : entry.path;
  if (Buffer.byteLength(name) > 100) throw new Error(`tar entry name too long: ${name}`);
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, 'utf8');
  block.write(octal(entry.mode, 8), 100, 8, 'ascii');
  block.write(octal(entry.uid, 8), 108, 8, 'ascii');
  block.write(octal(entry.gid, 8), 116, 8, 'ascii');
  block.write(octal(size, 12), 124, 12, 'ascii');
  block.write(octal(Math.floor(Date.now() / 1000), 12), 136, 12, 'ascii');
  block.write(' '.repeat(8), 148, 8, 'ascii');
  block.write(entry.type === 'directory' ? '5' : '0', 156, 1, 'ascii');
  block.write('ustar\0', 257, 6, 'ascii');
  block.write('00', 263, 2, 'ascii');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(octal(sum, 7) + ' ', 148, 8, 'ascii');
  return block;
}

export function tarArchive(entries: TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const content = entry.type === 'file' ? (entry.content ?? Buffer.alloc(0)) : Buffer.alloc(0);
    parts.push(header(entry, content.length), content);
    const padding = (BLOCK - (content.length % BLOCK)) % BLOCK;
    if (padding) parts.push(Buffer.alloc(padding));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}
