import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { authorizePublisher, type PublisherAuthorityDecision, type PublisherAuthorityOptions } from '../../media/publisher-authority/publisher-authority.client.js';
import { refuseDestination, specialRange } from '../../media/publisher-authority/publisher-authority.destination.js';
import { PUBLISHER_AUTHORITY_REQUEST } from '../support/media-control.js';

/**
 * Where the publisher-authority callback may connect (server-side request forgery): an Environment owner writes the
 * `roleAuthorityUrl`, so the registry must not call this host's loopback services or private, link-local and other
 * special-purpose networks for it, whatever the name resolves to at call time. Real listeners on 127.0.0.1 count the
 * connections that reach them; only DNS is stood in for (the `resolve` hook), since DNS is what is under test.
 */

/** An http backend on 127.0.0.1 that allows, counting connections. */
let http: HttpServer;
let httpPort: number;
let httpConnections = 0;
/** A bare TCP listener on 127.0.0.1 for https addresses: any connection counts, then is dropped (no TLS). */
let tcp: TcpServer;
let tcpPort: number;
let tcpConnections = 0;

test.before(async () => {
  http = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ decision: 'allow' })));
  });
  http.on('connection', () => httpConnections++);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  httpPort = (http.address() as AddressInfo).port;
  tcp = createTcpServer((socket) => {
    tcpConnections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  tcpPort = (tcp.address() as AddressInfo).port;
});
test.after(async () => {
  http.closeAllConnections();
  await Promise.all([new Promise<void>((resolve) => http.close(() => resolve())), new Promise<void>((resolve) => tcp.close(() => resolve()))]);
});

const body = PUBLISHER_AUTHORITY_REQUEST;
const PUBLISH = { grantScopes: ['media:connect', 'media:publish'] } as const;

/** DNS stand-in: every name answers `addresses` (a list per call when given several), and the names asked are kept. */
function resolver(...answers: ReadonlyArray<readonly string[]>): NonNullable<PublisherAuthorityOptions['resolve']> & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (hostname: string) => {
    const answer = answers[Math.min(asked.length, answers.length - 1)]!;
    asked.push(hostname);
    return answer.map((address) => ({ address, family: address.includes(':') ? (6 as const) : (4 as const) }));
  };
  return Object.assign(resolve, { asked });
}

async function ask(url: string, options: Partial<PublisherAuthorityOptions> = {}): Promise<PublisherAuthorityDecision> {
  return authorizePublisher(url, body, { ...PUBLISH, ...options });
}

function assertForbidden(decision: PublisherAuthorityDecision, address: string, label = address): void {
  assert.is(decision.allowed, false, label);
  assert.is(decision.reason, 'destination_forbidden', `${label}: ${decision.reason} ${decision.detail ?? ''}`);
  assert.ok(decision.detail?.includes(address), `${label}: the detail names the address: ${decision.detail}`);
}

test('a backend on 127.0.0.1 is refused when loopback is not allowed (the default): no connection reaches it', async () => {
  const before = httpConnections;
  assertForbidden(await ask(`http://127.0.0.1:${httpPort}/allow`), '127.0.0.1');
  assertForbidden(await ask(`http://127.0.0.1:${httpPort}/allow`, { allowLoopback: false }), '127.0.0.1');
  assert.is(httpConnections, before);
});

test('IPv6 literals that reach IPv4 loopback are refused: IPv4-mapped and NAT64 (64:ff9b::/96)', async () => {
  const before = tcpConnections;
  // The canonical forms (the configuration check wants the URL exactly as WHATWG writes it) of ::ffff:127.0.0.1 and 64:ff9b::127.0.0.1.
  assertForbidden(await ask(`https://[::ffff:7f00:1]:${tcpPort}/authority`), '::ffff:7f00:1');
  assertForbidden(await ask(`https://[64:ff9b::7f00:1]:${tcpPort}/authority`), '64:ff9b::7f00:1');
  assertForbidden(await ask(`https://[::1]:${tcpPort}/authority`), '::1');
  assert.is(tcpConnections, before, 'no connection was opened');
});

test('a hostname that resolves to loopback is refused at call time: the connection is never opened', async () => {
  const before = tcpConnections;
  const dns = resolver(['127.0.0.1']);
  assertForbidden(await ask(`https://authority.environment.example:${tcpPort}/authority`, { resolve: dns }), '127.0.0.1');
  assert.equal(dns.asked, ['authority.environment.example'], 'the name was resolved by the callback itself');
  assert.is(tcpConnections, before);
});

test('every private and special-purpose range is refused, IPv4 and IPv6, IPv4 embedded in IPv6 included', async () => {
  const forbidden = [
    '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.254', '192.168.1.1', // private
    '169.254.169.254', // link-local: cloud metadata
    '100.64.0.1', '100.127.255.254', // CGNAT
    '0.0.0.0', '0.1.2.3', '224.0.0.1', '239.255.255.250', '255.255.255.255', '240.0.0.1', // unspecified, multicast, reserved
    '192.0.0.8', '192.0.2.1', '198.18.0.1', '198.51.100.1', '203.0.113.1', // IETF, documentation, benchmarking
    '::', 'fc00::1', 'fd12:3456:789a::1', 'fe80::1', 'fec0::1', 'ff02::1', '100::1', '2001:db8::1',
    '::ffff:a00:1', '::ffff:a9fe:a9fe', '64:ff9b::a9fe:a9fe', '64:ff9b::c0a8:101', '2002:c0a8:101::1', '::7f00:1',
  ];
  for (const address of forbidden) {
    for (const allowLoopback of [false, true]) {
      assertForbidden(await ask('https://authority.environment.example/authority', { resolve: resolver([address]), allowLoopback }), address, `${address} (allowLoopback ${allowLoopback})`);
    }
  }
});

test('a name answering a public and a forbidden address (DNS rebinding, split answers) is refused whole', async () => {
  const before = tcpConnections;
  assertForbidden(await ask(`https://authority.environment.example:${tcpPort}/authority`, { resolve: resolver(['93.184.215.14', '127.0.0.1']) }), '127.0.0.1');
  assertForbidden(await ask(`https://authority.environment.example:${tcpPort}/authority`, { resolve: resolver(['2606:2800:21f:cb07:6820:80da:af6b:8b2c', '::ffff:c0a8:101']) }), '::ffff:c0a8:101');
  assert.is(tcpConnections, before);
});

test('the name is resolved and checked again at every call: a rebind to a private address after an allowed call is refused', async () => {
  const dns = resolver(['127.0.0.1'], ['10.0.0.7']);
  const url = `http://localhost:${httpPort}/allow`;
  const before = httpConnections;
  assert.is((await ask(url, { resolve: dns, allowLoopback: true })).reason, 'allowed');
  assertForbidden(await ask(url, { resolve: dns, allowLoopback: true }), '10.0.0.7');
  assert.equal(dns.asked, ['localhost', 'localhost']);
  assert.is(httpConnections, before + 1, 'only the first call connected');
});

test('with loopback allowed, a backend on 127.0.0.1 is called over http, by literal and by a name resolving to it', async () => {
  const before = httpConnections;
  assert.equal(await ask(`http://127.0.0.1:${httpPort}/allow`, { allowLoopback: true }), { allowed: true, reason: 'allowed' });
  assert.equal(await ask(`http://localhost:${httpPort}/allow`, { allowLoopback: true, resolve: resolver(['127.0.0.1']) }), { allowed: true, reason: 'allowed' });
  assert.is(httpConnections, before + 2);
});

test('http only ever reaches loopback: a loopback name that resolves to a public address is refused even with loopback allowed', async () => {
  const before = httpConnections;
  assertForbidden(await ask(`http://localhost:${httpPort}/allow`, { allowLoopback: true, resolve: resolver(['93.184.215.14']) }), '93.184.215.14');
  assert.is(httpConnections, before);
});

test('a resolver that fails, or answers nothing, denies rather than throwing', async () => {
  const failing = async (): Promise<never> => {
    throw Object.assign(new Error('getaddrinfo ENOTFOUND authority.environment.example'), { code: 'ENOTFOUND' });
  };
  const failed = await ask('https://authority.environment.example/authority', { resolve: failing });
  assert.equal([failed.allowed, failed.reason], [false, 'network_error']);
  assert.match(failed.detail ?? '', /ENOTFOUND/);
  const empty = await ask('https://authority.environment.example/authority', { resolve: resolver([]) });
  assert.equal([empty.allowed, empty.reason], [false, 'network_error']);
});

test('the rule alone: each range\'s edges are refused, their public neighbours are not, loopback only when allowed', () => {
  const refused: Record<string, string> = {
    '10.255.255.255': 'private', '172.16.0.0': 'private', '172.31.255.255': 'private', '192.168.255.255': 'private',
    '100.64.0.0': 'shared_cgnat', '100.127.255.255': 'shared_cgnat', '169.254.0.1': 'link_local', '127.255.255.254': 'loopback',
    '0.0.0.0': 'this_network', '224.0.0.0': 'multicast', '255.255.255.255': 'reserved',
    '::': 'unspecified', '::1': 'loopback', 'fc00::': 'unique_local', 'fdff:ffff::1': 'unique_local', 'fe80::1%eth0': 'link_local',
    'febf::1': 'link_local', 'ff0e::1': 'multicast', '::ffff:127.0.0.1': 'ipv4_mapped:loopback', '0:0:0:0:0:ffff:a9fe:a9fe': 'ipv4_mapped:link_local',
    '64:ff9b::10.1.2.3': 'nat64:private', '64:ff9b::7f00:1': 'nat64:loopback', '2002:a00:1::': '6to4:private', '4000::1': 'not_global_unicast', 'fbff::1': 'not_global_unicast', '3fff:fff::1': 'documentation',
  };
  for (const [address, range] of Object.entries(refused)) assert.is(specialRange(address), range, address);
  const publicAddresses = ['9.255.255.255', '11.0.0.0', '172.15.255.255', '172.32.0.0', '192.167.255.255', '192.169.0.0', '100.63.255.255', '100.128.0.0', '169.253.255.255', '223.255.255.255', '8.8.8.8',
    '2606:4700::1111', '2001:4860:4860::8888', '3ffe::1', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '3fff:1000::1'];
  for (const address of publicAddresses) assert.is(refuseDestination(address, { allowLoopback: false }), undefined, address);
  for (const address of ['127.0.0.1', '::1', '::ffff:7f00:1']) {
    assert.equal(refuseDestination(address, { allowLoopback: false })?.address, address);
    assert.is(refuseDestination(address, { allowLoopback: true }), undefined, address);
  }
  for (const address of ['64:ff9b::7f00:1', '2002:7f00:1::', '::7f00:1', '10.0.0.1']) assert.ok(refuseDestination(address, { allowLoopback: true }), `${address}: not this host's loopback`);
});

test.run();
