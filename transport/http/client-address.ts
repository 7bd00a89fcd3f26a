import { isIPv4, isIPv6 } from 'node:net';
import { ipv6Groups } from '../ip-address.js';

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
