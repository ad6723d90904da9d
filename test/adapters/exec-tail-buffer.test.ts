/** The executor's output ring buffer: exactly the last N bytes, in order, with storage never above N. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TailBuffer } from "../../src/adapters/exec/tail-buffer.js";

describe("TailBuffer", () => {
  it("keeps exactly the last `capacity` bytes of any sequence of chunks", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 64 }),
        fc.array(fc.uint8Array({ maxLength: 100 }), { maxLength: 30 }),
        (capacity, chunks) => {
          const tail = new TailBuffer(capacity);
          for (const chunk of chunks) {
            tail.push(chunk);
            expect(tail.storedBytes).toBeLessThanOrEqual(capacity);
          }
          const all = Buffer.concat(chunks);
          const expected = all.subarray(Math.max(0, all.length - capacity));
          expect(tail.bytes().equals(expected)).toBe(true);
          expect(tail.totalBytes).toBe(all.length);
          expect(tail.truncated).toBe(all.length > capacity);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("drops a multi-byte character cut by truncation instead of mangling it", () => {
    const tail = new TailBuffer(4);
    tail.push(Buffer.from("ab☃cd")); // ☃ is 3 bytes; the last 4 bytes are its last 2 and "cd"
    expect(tail.bytes().length).toBe(4);
    expect(tail.text()).toBe("cd");
    const whole = new TailBuffer(5);
    whole.push(Buffer.from("☃cd"));
    expect(whole.text()).toBe("☃cd");
  });

  it("grows its storage only as output arrives", () => {
    const tail = new TailBuffer(64 * 1024 * 1024);
    tail.push(Buffer.from("hello"));
    expect(tail.storedBytes).toBeLessThan(10_000);
    expect(tail.text()).toBe("hello");
  });
});
