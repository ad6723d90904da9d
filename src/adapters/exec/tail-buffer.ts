/** A byte ring buffer that keeps only the last N bytes written to it, so a noisy action cannot exhaust memory. */

export class TailBuffer {
  /** Every byte pushed, kept or not. */
  totalBytes = 0;
  // Grows on demand up to the capacity, so a quiet action with a large limit costs little.
  private storage = Buffer.alloc(0);
  /** Once full, where the oldest byte is (and the next write goes). */
  private end = 0;
  private filled = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new RangeError(`bad capacity ${capacity}`);
  }

  get truncated(): boolean {
    return this.totalBytes > this.filled;
  }

  /** Bytes held right now; never more than the capacity. */
  get storedBytes(): number {
    return this.storage.length;
  }

  push(chunk: Uint8Array): void {
    this.totalBytes += chunk.length;
    if (this.capacity === 0 || chunk.length === 0) return;
    if (chunk.length >= this.capacity) {
      this.grow(this.capacity);
      this.storage.set(chunk.subarray(chunk.length - this.capacity));
      this.end = 0;
      this.filled = this.capacity;
      return;
    }
    if (this.filled < this.capacity) {
      // Not yet wrapped: the data sits contiguously in [0, filled).
      const need = this.filled + chunk.length;
      if (need <= this.capacity) {
        if (need > this.storage.length) {
          this.grow(Math.min(this.capacity, Math.max(this.storage.length * 2, need, 4096)));
        }
        this.storage.set(chunk, this.filled);
        this.filled = need;
        this.end = need % this.storage.length;
        return;
      }
      this.grow(this.capacity);
      this.end = this.filled;
    }
    // Full ring of exactly `capacity` bytes; the oldest byte is at `end`.
    const first = Math.min(chunk.length, this.capacity - this.end);
    this.storage.set(chunk.subarray(0, first), this.end);
    this.storage.set(chunk.subarray(first), 0);
    this.end = (this.end + chunk.length) % this.capacity;
    this.filled = this.capacity;
  }

  /** The kept bytes, oldest first. */
  bytes(): Buffer {
    if (this.filled < this.storage.length) return Buffer.from(this.storage.subarray(0, this.filled));
    return Buffer.concat([this.storage.subarray(this.end), this.storage.subarray(0, this.end)]);
  }

  /** The kept bytes as UTF-8; a multi-byte character cut in half by truncation is dropped, not mangled. */
  text(): string {
    let bytes = this.bytes();
    if (this.truncated) {
      let skip = 0;
      while (skip < 3 && skip < bytes.length && ((bytes[skip] ?? 0) & 0xc0) === 0x80) skip += 1;
      bytes = bytes.subarray(skip);
    }
    return bytes.toString("utf8");
  }

  private grow(size: number): void {
    if (size <= this.storage.length) return;
    const next = Buffer.alloc(size);
    this.storage.copy(next, 0, 0, this.filled);
    this.storage = next;
  }
}
