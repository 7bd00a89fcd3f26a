import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** A random identifier `<prefix>_<26 base32 characters>` (130 random bits), safe in paths, headers and actor keys. */
export function newId(prefix: string): string {
  const bytes = randomBytes(17);
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 26) {
      bits -= 5;
      out += ALPHABET[(buffer >> bits) & 31];
    }
    buffer &= (1 << bits) - 1;
  }
  return `${prefix}_${out}`;
}

export const idPattern = (prefix: string): RegExp => new RegExp(`^${prefix}_[0-9a-hjkmnp-tv-z]{26}$`);
