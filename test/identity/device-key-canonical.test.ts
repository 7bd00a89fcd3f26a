import { calculateJwkThumbprint } from 'jose';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * A P-256 coordinate is 32 bytes, 43 base64url characters: the last character carries 2 padding bits that RFC 4648
 * (section 3.5) requires to be zero in the canonical encoding. A coordinate with those bits set decodes to the same
 * point, so the same device key can be presented under 16 different JWKs, each with its own RFC 7638 thumbprint.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** Same decoded bytes, non-zero padding bits: flips the lowest bit of the last character's 6-bit value. */
const nonCanonical = (coordinate: string): string => coordinate.slice(0, 42) + ALPHABET[ALPHABET.indexOf(coordinate[42]!) ^ 1]!;

test('a device key whose coordinates are not canonical base64url is refused (one key, one thumbprint)', async () => {
  const device = await DeviceClient.generate('laptop');
  const canonical = device.publicJwk;
  const malleated = { ...canonical, x: nonCanonical(canonical.x!), y: nonCanonical(canonical.y!) };
  assert.is.not(malleated.x, canonical.x);
  const res = await fetch(`${server.url}/v1/enrol/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ handle: 'malleable', device: { name: 'laptop', publicKey: malleated } }),
  });
  const text = await res.text();
  if (res.status === 201) {
    // Accepted: complete it with the very same private key, then look at the thumbprint the registry shows.
    const started = JSON.parse(text) as { enrolmentId: string; nonce: string; deviceId: string };
    device.deviceId = started.deviceId;
    const done = await device.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce });
    assert.is(done.status, 201, await done.clone().text());
    const list = (await (await device.request(server.url, 'GET', '/v1/account/devices')).json()) as { devices: Array<{ keyThumbprint: string }> };
    const shown = list.devices[0]!.keyThumbprint;
    const rfc7638 = await calculateJwkThumbprint({ kty: 'EC', crv: 'P-256', x: canonical.x!, y: canonical.y! });
    assert.unreachable(
      `a non-canonical JWK was accepted (201) and the device signs with the same key, yet its keyThumbprint ${shown} ` +
        `is not the RFC 7638 thumbprint of that key (${rfc7638})`,
    );
  }
  assert.is(res.status, 400, text);
  assert.is((JSON.parse(text) as { code: string }).code, 'device_key_invalid');
});

test.run();
