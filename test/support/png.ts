/**
 * A small PNG decoder for tests: checks the signature and every chunk's CRC, inflates the image
 * data and undoes the row filters, so "decodes as a PNG" means every pixel was read back.
 * 8-bit RGB and RGBA, not interlaced: what resvg writes.
 */
import { crc32, inflateSync } from "node:zlib";

export interface DecodedPng {
  width: number;
  height: number;
  /** RGBA, 4 bytes per pixel, row after row. */
  rgba: Uint8Array;
}

const SIGNATURE = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);

export function decodePng(bytes: Uint8Array): DecodedPng {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!buf.subarray(0, 8).equals(SIGNATURE)) throw new Error("not a PNG: bad signature");
  let at = 8;
  let width = 0;
  let height = 0;
  let colorType = -1;
  const idat: Buffer[] = [];
  let ended = false;
  while (at < buf.length) {
    const length = buf.readUInt32BE(at);
    const type = buf.toString("latin1", at + 4, at + 8);
    const data = buf.subarray(at + 8, at + 8 + length);
    const crc = buf.readUInt32BE(at + 8 + length);
    if (crc32(buf.subarray(at + 4, at + 8 + length)) !== crc) throw new Error(`bad CRC in ${type} chunk`);
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8];
      colorType = data[9]!;
      if (depth !== 8 || (colorType !== 2 && colorType !== 6) || data[12] !== 0) {
        throw new Error(`unsupported PNG: depth ${depth}, colour type ${colorType}, interlace ${data[12]}`);
      }
    } else if (type === "IDAT") idat.push(data);
    else if (type === "IEND") {
      ended = true;
      break;
    }
    at += 12 + length;
  }
  if (!ended) throw new Error("PNG has no IEND chunk");
  const channels = colorType === 6 ? 4 : 3;
  const stride = width * channels;
  const raw = inflateSync(Buffer.concat(idat));
  if (raw.length !== height * (stride + 1)) {
    throw new Error(`PNG data is ${raw.length} bytes; ${width}×${height} needs ${height * (stride + 1)}`);
  }
  const out = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const row = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const base = y * stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? out[base + x - channels]! : 0;
      const b = y > 0 ? out[base - stride + x]! : 0;
      const c = x >= channels && y > 0 ? out[base - stride + x - channels]! : 0;
      let v = row[x]!;
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (filter !== 0) throw new Error(`bad filter ${filter} on row ${y}`);
      out[base + x] = v & 0xff;
    }
  }
  if (channels === 4) return { width, height, rgba: out };
  const rgba = new Uint8Array(width * height * 4);
  for (let i = 0; i < width * height; i++) {
    rgba.set(out.subarray(i * 3, i * 3 + 3), i * 4);
    rgba[i * 4 + 3] = 255;
  }
  return { width, height, rgba };
}

/** How many pixels have exactly this colour ("#rrggbb"). */
export function countColour(png: DecodedPng, hex: string): number {
  const r = parseInt(hex.slice(1, 3), 16);
  const g = parseInt(hex.slice(3, 5), 16);
  const b = parseInt(hex.slice(5, 7), 16);
  let n = 0;
  for (let i = 0; i < png.rgba.length; i += 4) {
    if (png.rgba[i] === r && png.rgba[i + 1] === g && png.rgba[i + 2] === b) n++;
  }
  return n;
}

/** Pixels darker than `luma` (0–255): ink. */
export function countDark(png: DecodedPng, luma: number): number {
  let n = 0;
  for (let i = 0; i < png.rgba.length; i += 4) {
    const y = 0.299 * png.rgba[i]! + 0.587 * png.rgba[i + 1]! + 0.114 * png.rgba[i + 2]!;
    if (y < luma) n++;
  }
  return n;
}
