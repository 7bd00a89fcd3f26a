import { randomBytes } from 'node:crypto';

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

/** A random identifier `<prefix>_<26 base32 characters>` (130 random bits), safe in paths, headers and actor keys. */
export function newId(prefix: string): string {
  return `${prefix}_${base32(randomBytes(17), 26)}`;
}

export const idPattern = (prefix: string): RegExp => new RegExp(`^${prefix}_[0-9a-hjkmnp-tv-z]{26}$`);

/** An account handle: lower-case, a letter then 2 to 31 of a-z 0-9 _ -. */
export const HANDLE = /^[a-z][a-z0-9_-]{2,31}$/;
