import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { DeviceAssertionVerifier, ReplayGuard, type DurableAssertionUses } from '../../identity/device-assertion.js';
import type { IncomingRequest } from '../../transport/http/credentials.js';
import { HttpError } from '../../transport/http/errors.js';

/**
 * The verifier on its own (a key of its own, an in-memory record of used ids): how it reads the compact JWS's parts.
 * Every assertion below is validly signed over exactly the characters it carries, so only the spelling is at stake.
 * A compact JWS part is base64url (RFC 7515 2, RFC 4648 5): a length of 4k+1 characters is no encoding of any bytes,
 * and jose (atob) refused it; Buffer's decoder drops the odd character instead.
 */
const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const memory: DurableAssertionUses = { record: async () => {}, unexpired: async () => [] };
let verifier: DeviceAssertionVerifier;

test.before(async () => {
  const replays = await ReplayGuard.open(clock, memory);
  const key: KeyObject = publicKey;
  verifier = new DeviceAssertionVerifier({
    clock,
    replays,
    lookup: async (deviceId) =>
      deviceId === 'dev_one' ? { deviceId, accountId: 'acc_one', status: 'active', key, thumbprint: 'tp', accountEpoch: 1 } : undefined,
  });
});

let counter = 0;
const b64u = (text: string): string => Buffer.from(text).toString('base64url');
/** JSON text padded with spaces (JSON whitespace) to a multiple of 3 bytes: its base64url has no partial quantum. */
const whole = (value: unknown): string => {
  let text = JSON.stringify(value);
  while (Buffer.byteLength(text) % 3 !== 0) text += ' ';
  return text;
};
const headerText = (): string => whole({ alg: 'ES256', typ: 'device-assertion+jwt', kid: 'dev_one' });
const payloadText = (): string =>
  whole({ htm: 'GET', htu: '/v1/account/devices', iat: Math.floor(clock.now() / 1000), jti: `jti-${String(counter++).padStart(16, '0')}` });

/** Signs exactly `header.payload` (the parts as given) with the device's key. */
function jws(header: string, payload: string): string {
  const signature = sign('sha256', Buffer.from(`${header}.${payload}`), { key: privateKey, dsaEncoding: 'ieee-p1363' });
  return `${header}.${payload}.${signature.toString('base64url')}`;
}

function request(assertion: string): IncomingRequest {
  return { method: 'GET', path: '/v1/account/devices', query: '', headers: { 'platform-device-assertion': assertion }, remoteAddress: '127.0.0.1', body: Buffer.alloc(0) };
}

async function refusal(assertion: string): Promise<string | undefined> {
  try {
    await verifier.verify(request(assertion), { bodyBound: false });
    return undefined;
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    return error.code;
  }
}

test('the same assertion, spelled as strict base64url, verifies', async () => {
  const header = b64u(headerText());
  assert.is(header.length % 4, 0);
  assert.is(await refusal(jws(header, b64u(payloadText()))), undefined);
});

test('a header part of 4k+1 characters is not base64url: refused, though signed', async () => {
  assert.is(await refusal(jws(`${b64u(headerText())}A`, b64u(payloadText()))), 'device_assertion_invalid');
});

test('a payload part of 4k+1 characters is not base64url: refused, though signed', async () => {
  const payload = b64u(payloadText());
  assert.is(payload.length % 4, 0);
  assert.is(await refusal(jws(b64u(headerText()), `${payload}A`)), 'device_assertion_invalid');
});

test.run();
