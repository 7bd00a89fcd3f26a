import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { assertProblem, enrolFirst } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The assertion's JWS is verified by the registry itself (node:crypto on a KeyObject), so what a JOSE library would
 * refuse on top of the signature is refused here too: a `crit` header, an unencoded payload (`b64`), and any
 * spelling of a part other than unpadded base64url. Each assertion below is validly signed by the enrolled device.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

const TARGET = '/v1/account/devices';
const send = (assertion: string): Promise<Response> => fetch(server.url + TARGET, { headers: { 'platform-device-assertion': assertion } });
const sign = (device: DeviceClient, extraHeader?: Record<string, unknown>): Promise<string> =>
  device.assertion({ method: 'GET', target: TARGET, ...(extraHeader ? { extraHeader } : {}) });

test('a validly signed header naming critical extensions or an unencoded payload is refused', async () => {
  const { device } = await enrolFirst(server.url, 'crit');
  await assertProblem(await send(await sign(device, { crit: ['exp'], exp: 1 })), 401, 'device_assertion_invalid');
  await assertProblem(await send(await sign(device, { crit: [] })), 401, 'device_assertion_invalid');
  await assertProblem(await send(await sign(device, { b64: false })), 401, 'device_assertion_invalid');
  // The same route of signing with an unremarkable extra member is accepted: the refusals above are about the members.
  const plain = await send(await sign(device, { note: 'x' }));
  assert.is(plain.status, 200, await plain.text());
});

test('parts spelled other than unpadded base64url are refused, though they would decode to the signed bytes', async () => {
  const { device } = await enrolFirst(server.url, 'spelling');
  const respell = async (change: (parts: string[]) => void): Promise<Response> => {
    const parts = (await sign(device)).split('.');
    change(parts);
    return send(parts.join('.'));
  };
  await assertProblem(await respell((p) => (p[2] += '==')), 401, 'device_assertion_invalid');
  // Standard base64 with its padding: the same 64 bytes.
  await assertProblem(await respell((p) => (p[2] = Buffer.from(p[2]!, 'base64url').toString('base64'))), 401, 'device_assertion_invalid');
  await assertProblem(await respell((p) => (p[2] = `${p[2]!.slice(0, 40)} ${p[2]!.slice(40)}`)), 401, 'device_assertion_invalid');
  await assertProblem(await respell((p) => (p[2] = p[2]!.slice(0, 43))), 401, 'device_assertion_invalid');
  // Untouched, the same kind of assertion passes.
  const res = await send(await sign(device));
  assert.is(res.status, 200, await res.text());
});

test.run();
