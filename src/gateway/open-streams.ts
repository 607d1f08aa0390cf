/** Long-lived responses (SSE, WebSocket) the gateway must end itself on close: servers do not wait for them. */
export class OpenStreams {
  private readonly closers = new Set<() => void>();

  /** Registers a closer; returns the function that unregisters it (call it when the stream ends by itself). */
  add(close: () => void): () => void {
    this.closers.add(close);
    return () => this.closers.delete(close);
  }

  closeAll(): void {
    for (const close of [...this.closers]) close();
    this.closers.clear();
  }
}
