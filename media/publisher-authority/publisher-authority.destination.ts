import { isIPv4, isIPv6 } from 'node:net';
import { ipv6Groups } from '../../transport/ip-address.js';

/**
 * Where the publisher-authority callback may connect. The address is an Environment owner's text
 * (`roleAuthorityUrl`), and the registry sends it a plugin grant, so without this rule an owner could make the
 * registry call this host's own services (the operator listener, Postgres) or any private network it sits on, either
 * by a literal address or by a name that resolves there, perhaps only at call time (DNS rebinding). The rule is
 * applied to every address the connection could use, after DNS, just before connecting.
 *
 * Allowed: public unicast only. IPv6 must be global unicast (2000::/3) outside the special-purpose blocks below; IPv6
 * that carries an IPv4 address this host would reach (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96, 6to4
 * 2002::/16) is judged by that IPv4 address. Loopback (127/8, ::1, IPv4-mapped 127/8) only when
 * `allowLoopback` (MEDIA_CALLBACK_ALLOW_LOOPBACK, for development and tests); every other range never. Ranges are
 * IANA's special-purpose registries (RFC 6890 and successors).
 */
export interface DestinationRule {
  readonly allowLoopback: boolean;
}

/** A refused address and the range that refused it, for the deny reason and logs. */
export interface DestinationRefusal {
  readonly address: string;
  readonly range: string;
}

type Block = readonly [network: bigint, prefix: number, range: string];

const V4_BLOCKS: readonly (readonly [string, number, string])[] = [
  ['0.0.0.0', 8, 'this_network'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared_cgnat'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link_local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'ietf_protocol'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, 'relay_anycast'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];

/** IPv6 blocks refused outright; the embedding prefixes (mapped, NAT64, 6to4) are handled apart, before these. */
const V6_BLOCKS: readonly (readonly [string, number, string])[] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['::', 96, 'ipv4_compatible'],
  ['64:ff9b:1::', 48, 'nat64_local'],
  ['100::', 64, 'discard'],
  ['2001:db8::', 32, 'documentation'],
  ['2001::', 23, 'ietf_protocol'],
  ['3fff::', 20, 'documentation'],
  ['fc00::', 7, 'unique_local'],
  ['fe80::', 10, 'link_local'],
  ['fec0::', 10, 'site_local'],
  ['ff00::', 8, 'multicast'],
];

const V4_MAPPED: Block = [v6Number('::ffff:0:0'), 96, 'ipv4_mapped'];
const NAT64: Block = [v6Number('64:ff9b::'), 96, 'nat64'];
const SIX_TO_FOUR: Block = [v6Number('2002::'), 16, '6to4'];
const GLOBAL_UNICAST: Block = [v6Number('2000::'), 3, 'global_unicast'];

function v4Number(text: string): bigint {
  return text.split('.').reduce((n, octet) => (n << 8n) | BigInt(Number(octet)), 0n);
}

/** The 128-bit value of a valid IPv6 text (`isIPv6`), a trailing dotted IPv4 and a zone index allowed. */
function v6Number(text: string): bigint {
  return ipv6Groups(text).reduce((n, group) => (n << 16n) | BigInt(group), 0n);
}

const V4: readonly Block[] = V4_BLOCKS.map(([text, prefix, range]) => [v4Number(text), prefix, range]);
const V6: readonly Block[] = V6_BLOCKS.map(([text, prefix, range]) => [v6Number(text), prefix, range]);

function within(value: bigint, bits: number, [network, prefix]: Block): boolean {
  const shift = BigInt(bits - prefix);
  return value >> shift === network >> shift;
}

function v4Range(value: bigint): string | undefined {
  return V4.find((block) => within(value, 32, block))?.[2];
}

/** The range an address is in when it is not public unicast (`loopback` included), undefined when it is. */
export function specialRange(address: string): string | undefined {
  if (isIPv4(address)) return v4Range(v4Number(address));
  if (!isIPv6(address)) return 'not_an_address';
  const value = v6Number(address);
  for (const [block, embedded] of [
    [V4_MAPPED, value & 0xffffffffn],
    [NAT64, value & 0xffffffffn],
    [SIX_TO_FOUR, (value >> 80n) & 0xffffffffn],
  ] as const) {
    if (within(value, 128, block)) {
      const range = v4Range(embedded);
      return range === undefined ? undefined : `${block[2]}:${range}`;
    }
  }
  const range = V6.find((block) => within(value, 128, block))?.[2];
  if (range !== undefined) return range;
  return within(value, 128, GLOBAL_UNICAST) ? undefined : 'not_global_unicast';
}

/**
 * Whether an address is this host's loopback: 127/8, ::1, or IPv4-mapped 127/8 (which the kernel delivers to 127/8).
 * IPv4 loopback behind NAT64 or 6to4 is some gateway's loopback, not ours: refused even when loopback is allowed.
 */
export function isLoopback(address: string): boolean {
  const range = specialRange(address);
  return range === 'loopback' || range === 'ipv4_mapped:loopback';
}

/** Why the callback may not connect to `address`, or undefined when it may. */
export function refuseDestination(address: string, rule: DestinationRule): DestinationRefusal | undefined {
  const range = specialRange(address);
  if (range === undefined) return undefined;
  if (rule.allowLoopback && isLoopback(address)) return undefined;
  return Object.freeze({ address, range });
}
