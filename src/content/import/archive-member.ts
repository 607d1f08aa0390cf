/** What an archive reader (tar, zip) hands to the importer: one member's header and a way to read its bytes. */
export type MemberKind = 'file' | 'directory' | 'symlink' | 'hardlink' | 'device' | 'fifo' | 'socket' | 'unsupported';

export interface ArchiveMember {
  /** The member's name as the archive spells it (not yet checked). */
  path: string;
  kind: MemberKind;
  /** Declared uncompressed size. */
  size: number;
  /** Permission bits from the archive (only the executable bits are kept). */
  mode: number;
  /** The member's bytes; a member whose body is not read is skipped by the reader. */
  body(): AsyncIterable<Buffer>;
}
