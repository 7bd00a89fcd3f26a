import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MediaEnvironmentConfigV2Schema } from '../../plugins/media/media-config.schema.js';
import { productParts } from '../../server/main.js';
import { jsonOf } from '../support/http.js';
import { enrolFirst } from '../support/identity.js';
import { installPlugin, testEnvironment, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * PUT /registry/environments/{environmentId}/plugins/plg_media/configuration on the operator listener, with
 * documents the structural schema refuses ("no other properties"), against the real server.
 */
let server: TestServer;
let world: TestEnvironment;

withTestServer(test, (started) => ({ server } = started), productParts);
test.before(async () => {
  await enrolFirst(server.url, 'olga');
  world = await testEnvironment(server.opsUrl, 'input-world', 'olga');
  await installPlugin(server.opsUrl, world.environmentId, 'plg_media');
});

const put = (body: string) =>
  fetch(`${server.opsUrl}/registry/environments/${world.environmentId}/plugins/plg_media/configuration`, {
    method: 'PUT',
    body,
    headers: { 'content-type': 'application/json', 'x-operator-name': 'test-operator' },
  });

test('a top-level "__proto__" member is an unknown member: 400 validation_failed, not 200', async () => {
  const body = '{"directCalls":{"enabled":true},"__proto__":{"theme":"dark"}}';
  // The structural schema itself refuses it (as it does one level down).
  assert.is(MediaEnvironmentConfigV2Schema.safeParse(JSON.parse(body)).success, false, 'the schema refuses the document');
  const res = await put(body);
  const answer = await jsonOf(res);
  assert.is(res.status, 400, `accepted: ${JSON.stringify(answer)}`);
  assert.equal(((answer.error as { details: Array<{ pointer: string }> }).details ?? []).map((d) => d.pointer), ['/__proto__']);
});

test('details[].pointer of an unknown member is a JSON Pointer (RFC 6901: "/" as ~1, "~" as ~0)', async () => {
  const res = await put(JSON.stringify({ directCalls: { enabled: true }, 'a/b': 1, 'c~d': 2 }));
  assert.is(res.status, 400);
  const details = ((await jsonOf(res)).error as { details: Array<{ pointer: string; code: string }> }).details;
  assert.equal(details.map((d) => d.pointer).sort(), ['/a~1b', '/c~0d']);
});

test.run();
