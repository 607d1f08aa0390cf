/**
 * Hand-made tar bytes for the attack tests: any name (NUL bytes and backslashes included, through pax or GNU `L`
 * records), any type flag, any declared size, base-256 numbers. System tar refuses to write most of these.
 */
const BLOCK = 512;

export interface CraftedMember {
  name: string;
  /** Type flag: '0' file, '1' hardlink, '2' symlink, '3' char device, '5' directory, '6' fifo… */
  type?: string;
  content?: Buffer;
  /** Declared size when there is no content (the body is then not written: for streamed bombs). */
  size?: number;
  linkname?: string;
  mode?: number;
  /** Raw pax records for an `x` header before this member. */
  pax?: Record<string, string>;
  /** A GNU `L` long name record before this member. */
  gnuLongName?: Buffer;
  base256Size?: boolean;
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

export function tarHeader(m: { name: string; type: string; size: number; linkname?: string; mode?: number; base256Size?: boolean }): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(m.name, 0, 100, 'utf8');
  block.write(octal(m.mode ?? 0o644, 8), 100, 8, 'ascii');
  block.write(octal(0, 8), 108, 8, 'ascii');
  block.write(octal(0, 8), 116, 8, 'ascii');
  if (m.base256Size) {
    block[124] = 0x80;
    let v = m.size;
    for (let i = 135; i > 124; i--) {
      block[i] = v % 256;
      v = Math.floor(v / 256);
    }
  } else block.write(octal(m.size, 12), 124, 12, 'ascii');
  block.write(octal(1_700_000_000, 12), 136, 12, 'ascii');
  block.write(' '.repeat(8), 148, 8, 'ascii');
  block.write(m.type, 156, 1, 'latin1');
  if (m.linkname) block.write(m.linkname, 157, 100, 'utf8');
  block.write('ustar\0', 257, 6, 'ascii');
  block.write('00', 263, 2, 'ascii');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(octal(sum, 7) + ' ', 148, 8, 'ascii');
  return block;
}

const pad = (n: number) => Buffer.alloc((BLOCK - (n % BLOCK)) % BLOCK);

function paxBody(records: Record<string, string>): Buffer {
  const parts = Object.entries(records).map(([key, value]) => {
    const body = Buffer.from(` ${key}=${value}\n`);
    let length = body.length + 1;
    while (String(length).length + body.length !== length) length = String(length).length + body.length;
    return Buffer.concat([Buffer.from(String(length)), body]);
  });
  return Buffer.concat(parts);
}

/** The header blocks (and pax/L records) of one member, without its body. */
export function memberHead(m: CraftedMember): Buffer {
  const parts: Buffer[] = [];
  if (m.pax) {
    const body = paxBody(m.pax);
    parts.push(tarHeader({ name: 'PaxHeader', type: 'x', size: body.length }), body, pad(body.length));
  }
  if (m.gnuLongName) {
    parts.push(tarHeader({ name: '././@LongLink', type: 'L', size: m.gnuLongName.length }), m.gnuLongName, pad(m.gnuLongName.length));
  }
  const size = m.content?.length ?? m.size ?? 0;
  parts.push(tarHeader({ name: m.name, type: m.type ?? '0', size, linkname: m.linkname, mode: m.mode, base256Size: m.base256Size }));
  return Buffer.concat(parts);
}

export function craftTar(members: CraftedMember[]): Buffer {
  const parts: Buffer[] = [];
  for (const m of members) {
    parts.push(memberHead(m));
    if (m.content) parts.push(m.content, pad(m.content.length));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}
