import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** The first `length` characters of Crockford-style lower-case base32 of `bytes` (5 bits each). */
export function base32(bytes: Uint8Array, length: number): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < length) {
      bits -= 5;
      out += ALPHABET[(buffer >> bits) & 31];
    }
    buffer &= (1 << bits) - 1;
  }
  if (out.length < length) throw new Error(`base32 needs ${Math.ceil((length * 5) / 8)} bytes`);
  return out;
}

/**
 * Random bytes from the operating system's CSPRNG, fetched a few KiB at a time: a call into OpenSSL per identifier
 * cost more than the rest of making it (three or four per token exchange). Node's randomUUID keeps such a cache too.
 * Every byte is handed out once; the view is valid only until the next call, so callers encode it at once.
 */
const entropy = Buffer.alloc(8192);
let entropyAt = entropy.length;

export function randomView(length: number): Buffer {
  if (length > entropy.length) throw new RangeError(`at most ${entropy.length} random bytes at a time`);
  if (entropyAt + length > entropy.length) {
    randomFillSync(entropy);
    entropyAt = 0;
  }
  const view = entropy.subarray(entropyAt, entropyAt + length);
  entropyAt += length;
  return view;
}

/** A random identifier `<prefix>_<26 base32 characters>` (130 random bits), safe in paths, headers and actor keys. */
export function newId(prefix: string): string {
  return `${prefix}_${base32(randomView(17), 26)}`;
}

export const idPattern = (prefix: string): RegExp => new RegExp(`^${prefix}_[0-9a-hjkmnp-tv-z]{26}$`);

/** An account handle: lower-case, a letter then 2 to 31 of a-z 0-9 _ -. */
export const HANDLE = /^[a-z][a-z0-9_-]{2,31}$/;
