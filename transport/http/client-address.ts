import { isIPv4, isIPv6 } from 'node:net';

/**
 * The share of the address space a per-address limit counts as one client: an IPv4 address, or an IPv6 /64. One
 * subscriber is routinely given a whole /64 (RFC 6177), so counting IPv6 addresses one by one gave a single client
 * 2^64 buckets: every per-address limit unlimited, and a stream of fresh addresses pushing other clients' buckets out
 * of the limiter's bounded table. An IPv4-mapped IPv6 address (a dual-stack socket's view of an IPv4 client) is that
 * IPv4 address. Text that is no address (uWS gives what the socket gave) is its own bucket.
 */
export function clientBucket(address: string): string {
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return address;
  const groups = ipv6Groups(address.toLowerCase());
  // ::ffff:a.b.c.d, written either way.
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a trailing dotted IPv4 part as two groups). */
function ipv6Groups(address: string): number[] {
  const withoutZone = address.split('%')[0]!;
  const parse = (part: string): number[] => {
    if (part === '') return [];
    return part.split(':').flatMap((group) => {
      if (!group.includes('.')) return [Number.parseInt(group, 16)];
      const [a, b, c, d] = group.split('.').map(Number) as [number, number, number, number];
      return [(a << 8) | b, (c << 8) | d];
    });
  };
  const [head, tail] = withoutZone.split('::') as [string, string | undefined];
  if (tail === undefined) return parse(head);
  const start = parse(head);
  const end = parse(tail);
  return [...start, ...new Array<number>(8 - start.length - end.length).fill(0), ...end];
}
