import { pointerToken } from './http/errors.js';

/**
 * The JSON Pointer of the first own `__proto__` member in `value` (its own stack: bodies may nest deep), or undefined.
 * JSON.parse makes `__proto__` an own member, which schema validation then never sees (zod skips it): HTTP bodies and
 * WebSocket messages refuse it, or a member the client sent would be silently dropped.
 */
export function protoMemberAt(value: unknown): string | undefined {
  const pending: Array<readonly [unknown, string]> = [[value, '']];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const [node, pointer] = item;
    if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) pending.push([node[i], `${pointer}/${i}`]);
    } else if (typeof node === 'object' && node !== null) {
      if (Object.hasOwn(node, '__proto__')) return `${pointer}/__proto__`;
      for (const [name, child] of Object.entries(node)) pending.push([child, `${pointer}/${pointerToken(name)}`]);
    }
  }
  return undefined;
}

const PROTO_BYTES = Buffer.from('__proto__');
const ESCAPE_BYTES = Buffer.from('\\u');

/**
 * Only JSON text that can spell `__proto__` (plainly or escaped) needs the walk: as a string or as its UTF-8 bytes
 * (searched for with needles made once: a string needle is encoded again on every call, on the sockets' busiest path).
 */
export function maySpellProto(text: string | Buffer): boolean {
  if (typeof text === 'string') return text.includes('__proto__') || text.includes('\\u');
  return text.includes(PROTO_BYTES) || text.includes(ESCAPE_BYTES);
}
