/**
 * IP address text, as uWS reports a peer and as a resolver answers: shared by the per-address limits
 * (transport/http/client-address.ts) and the Media callback's destination rule.
 */

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a trailing dotted IPv4 part as two groups). */
export function ipv6Groups(address: string): number[] {
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
