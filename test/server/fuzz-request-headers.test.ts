import { test } from 'uvu';
import { HEADER_CASES } from '../support/fuzz-headers.js';
import { fillPath, type Operation } from '../support/fuzz.js';
import type { RawRequest } from '../support/fuzz-wire.js';
import { endsCredentials, fuzzTarget } from '../support/fuzz-server.js';

/**
 * Header oddities for every operation of the served OpenAPI document: malformed credentials of every scheme (device
 * assertions signed by a real device over hostile claims among them), Idempotency-Key, If-Match, cookies, repeats;
 * alone and in place of one header of a real credential. No answer is a 5xx, every refusal is in the error format.
 */
const target = fuzzTarget(test, 'fuzz-request-headers', 'headerfuzzer');

function headerRequests(authenticated: boolean): Array<{ name: string; op: Operation; request: () => Promise<RawRequest> }> {
  const { operations, credentials, example } = target();
  const out: Array<{ name: string; op: Operation; request: () => Promise<RawRequest> }> = [];
  for (const op of operations) {
    if (authenticated && (op.security.length === 0 || endsCredentials(op))) continue;
    const path = fillPath(op.path, { pluginId: 'plg_media' });
    const body = op.body?.mediaType === 'application/json' ? JSON.stringify(example(op.body.schema)) : undefined;
    for (const c of HEADER_CASES) {
      out.push({
        name: c.name,
        op,
        request: async () => {
          const odd = await c.headers({ method: op.method, target: path, device: credentials.device });
          const replaced = new Set(odd.map(([name]) => name.toLowerCase()));
          const auth = authenticated ? ((await credentials.headersFor(op.security, op.method, path, body)) ?? []) : [];
          const content: Array<[string, string]> = body === undefined || replaced.has('content-type') ? [] : [['Content-Type', 'application/json']];
          return { method: op.method, target: path, headers: [...auth.filter(([name]) => !replaced.has(name.toLowerCase())), ...content, ...odd], ...(body === undefined ? {} : { body }) };
        },
      });
    }
  }
  return out;
}

test('header oddities alone, on every operation', async () => {
  await target().fuzz('headers-anonymous', 0, headerRequests(false));
});

test('header oddities in place of one header of a real credential, on every operation', async () => {
  await target().fuzz('headers-authenticated', 0, headerRequests(true));
});

test.run();
