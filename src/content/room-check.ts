/**
 * The look for room a write makes as its bytes go to disk: the caller's `room` (the data directory's reserve, for a
 * member) is asked before the first byte and again after every MiB, so a write admitted while there was room stops
 * within a MiB of running out rather than filling the filesystem.
 */
/** Throws when there is no room now, or none for `upcomingBytes` more (a write whose size is known before it starts). */
export type Room = (upcomingBytes?: number) => Promise<void>;

const LOOK_EVERY_BYTES = 1024 * 1024;

export class RoomCheck {
  /** Bytes written since the last look; starts past the mark so the first write looks first. */
  private sinceLook = LOOK_EVERY_BYTES;

  constructor(private readonly room: Room | undefined) {}

  /** Before writing `bytes`: looks for room when a MiB or more went since the last look (throws what `room` throws). */
  async before(bytes: number): Promise<void> {
    if (!this.room) return;
    if (this.sinceLook >= LOOK_EVERY_BYTES) {
      this.sinceLook = 0;
      await this.room();
    }
    this.sinceLook += bytes;
  }
}
