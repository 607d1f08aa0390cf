/**
 * Import of an archive body (seed 001 §3.1): a tar, a tar.gz or a zip, told apart by magic bytes. The archive is
 * unpacked into a staging directory next to the source, member by member through the member policy and the caps, and
 * only a complete, accepted staging tree is put in place (land-staged.ts). A refused archive (a cap passed, a corrupt
 * header) stops being read at once and writes nothing; the staging directory is removed either way.
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { BerthError } from '../../../schemas/errors.ts';
import type { ContentLayout } from '../content-layout.ts';
import { contentLimits, type ContentLimits } from '../content-limits.ts';
import { removeTree } from '../remove-tree.ts';
import type { ArchiveMember } from './archive-member.ts';
import { archiveKind } from './archive-kind.ts';
import { ByteReader, type Body } from './byte-reader.ts';
import { ImportMeter } from './import-meter.ts';
import { SkipTally, type ImportResult } from './import-result.ts';
import { contentRootOf, landStaged } from './land-staged.ts';
import { MemberPolicy } from './member-policy.ts';
import { StagingWriter } from './staging-writer.ts';
import { RoomCheck, type Room } from '../room-check.ts';
import { readTar } from './tar-reader.ts';
import { readZip } from './zip-reader.ts';

export interface ImportOptions {
  /** Clear the source first; otherwise the import lands over what is there. */
  replace?: boolean;
  limits?: Partial<ContentLimits>;
  /** Looked at as the import writes (room-check.ts): the spooled zip and every member staged. */
  room?: Room;
}

export async function importArchive(layout: ContentLayout, body: Body, options: ImportOptions = {}): Promise<ImportResult> {
  const meter = new ImportMeter(contentLimits(options.limits));
  const work = path.join(layout.staging, `import-${randomUUID()}`);
  const reader = new ByteReader(body);
  try {
    await mkdir(work, { recursive: true });
    const members = await openMembers(reader, work, meter, options.room);
    const staged = path.join(work, 'tree');
    await mkdir(staged);
    const result = await unpack(members, new StagingWriter(staged, options.room), layout.maxPathBytes);
    const root = await contentRootOf(staged, true);
    await landStaged(layout, root.dir, options.replace ?? false);
    return root.strippedPrefix ? { ...result, strippedPrefix: root.strippedPrefix } : result;
  } finally {
    await reader.close();
    await removeTree(work);
  }
}

async function openMembers(reader: ByteReader, work: string, meter: ImportMeter, room: Room | undefined): Promise<AsyncIterable<ArchiveMember>> {
  const kind = archiveKind(await reader.peek(512));
  switch (kind) {
    case 'tar':
      return readTar(reader, meter);
    case 'gzip': {
      const inner = new ByteReader(gunzip(reader.rest(), meter));
      if (archiveKind(await inner.peek(512)) !== 'tar') throw invalid('unsupported_archive', 'The gzip stream does not hold a tar.');
      return readTar(inner, meter);
    }
    case 'zip': {
      // A zip's index is at its end: spool it (bounded) to read the central directory.
      const file = path.join(work, 'upload.zip');
      await pipeline(Readable.from(bounded(reader.rest(), meter, new RoomCheck(room))), createWriteStream(file, { mode: 0o600 }));
      return readZip(file, meter);
    }
    case 'empty':
      throw invalid('empty_archive', 'The import body is empty.');
    default:
      throw invalid('unsupported_archive', `The body is not a tar, tar.gz or zip archive (${kind}).`, { detected: kind });
  }
}

async function unpack(members: AsyncIterable<ArchiveMember>, writer: StagingWriter, maxPathBytes: number): Promise<ImportResult> {
  const policy = new MemberPolicy(maxPathBytes);
  const skipped = new SkipTally();
  try {
    for await (const member of members) {
      const decision = policy.decide(member.path, member.kind);
      if (decision.land === 'root') continue;
      if (decision.land === false) skipped.add(member.path, decision.reason);
      else if (member.kind === 'directory') await writer.directory(decision.rel);
      else await writer.file(decision.rel, member.mode, member.size, member.body());
    }
    await writer.finish();
  } catch (e) {
    await writer.settle(); // no background write may land after the staging directory is removed
    throw e;
  }
  return { files: writer.files, bytes: writer.bytes, skipped: skipped.count, skippedReasons: skipped.reasons() };
}

/** A gunzipped byte stream, with both sides counted on the meter (which stops it at a cap). */
async function* gunzip(input: AsyncIterable<Buffer>, meter: ImportMeter): AsyncGenerator<Buffer> {
  const source = Readable.from(
    (async function* () {
      for await (const chunk of input) {
        meter.compressed(chunk.length);
        yield chunk;
      }
    })(),
  );
  const inflate = createGunzip();
  source.on('error', (e) => inflate.destroy(e));
  source.pipe(inflate);
  try {
    for await (const chunk of inflate as AsyncIterable<Buffer>) {
      meter.expanded(chunk.length);
      yield chunk;
    }
  } catch (e) {
    if (e instanceof BerthError) throw e;
    throw invalid('corrupt_archive', 'The gzip stream is damaged.');
  } finally {
    source.destroy();
    inflate.destroy();
  }
}

/** The rest of a zip body, refused once it is larger than the total cap (it cannot expand to less). */
async function* bounded(input: AsyncIterable<Buffer>, meter: ImportMeter, room: RoomCheck): AsyncGenerator<Buffer> {
  let size = 0;
  for await (const chunk of input) {
    size += chunk.length;
    meter.spooled(size);
    await room.before(chunk.length);
    yield chunk;
  }
}

function invalid(reason: string, message: string, detail: Record<string, unknown> = {}): BerthError {
  return new BerthError('environment_invalid', message, { reason, ...detail });
}
