import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { productParts } from '../../server/main.js';
import { runtimePerson, testEnvironment, type RuntimePerson, type TestEnvironment } from '../support/runtime.js';
import { withTestServer, type TestServer } from '../support/server.js';
import { runtimeSocket, type Socket } from '../support/runtime-socket.js';
import { waitFor } from '../support/wait.js';

/**
 * RUNTIME_SOCKET_MESSAGES_PER_MINUTE is the session's, not each connection's: a newer socket of the session replaces
 * the older one, and if it started with a fresh burst, reconnecting would buy another minute's worth of messages at
 * once, as often as the client liked.
 */
let server: TestServer;
let env: TestEnvironment;
let ida: RuntimePerson;
let jon: RuntimePerson;
const PER_MINUTE = 5;

withTestServer(test, (started) => ({ server } = started), productParts, { RUNTIME_SOCKET_MESSAGES_PER_MINUTE: String(PER_MINUTE) });
test.before(async () => {
  ida = await runtimePerson(server, 'ida');
  jon = await runtimePerson(server, 'jon');
  env = await testEnvironment(server.opsUrl, 'budget-world', 'ida');
});

/** Sends `count` pings and waits until each is answered (pong) or refused (rate_limited); returns what came back. */
async function pings(socket: Socket, tag: string, count: number): Promise<string[]> {
  const before = socket.messages.length;
  for (let i = 0; i < count; i++) socket.send({ type: 'ping', ref: `${tag}${i}` });
  const answers = (): Array<Record<string, unknown>> => socket.messages.slice(before).filter((m) => m.type === 'pong' || m.type === 'error');
  await waitFor(() => answers().length >= count || answers().some((m) => m.code === 'rate_limited') || undefined, `answers to ${tag} pings`);
  return answers().map((m) => (m.type === 'pong' ? String(m.ref) : String(m.code)));
}

test("a reconnect of the session continues its budget; another person's session has its own", async () => {
  const page = await (await ida.runtime(env)).open();
  const first = await runtimeSocket(page);
  await first.next('ready');
  assert.equal(await pings(first, 'a', 3), ['a0', 'a1', 'a2']);
  first.ws.close();
  await first.closed;

  const second = await runtimeSocket(page);
  await second.next('ready');
  assert.equal(await pings(second, 'b', 3), ['b0', 'b1', 'rate_limited'], 'five messages a minute over both sockets of the session');
  assert.is((await second.closed).code, 4029);

  const other = await (await jon.runtime(env)).open();
  const theirs = await runtimeSocket(other);
  await theirs.next('ready');
  assert.equal(await pings(theirs, 'c', 5), ['c0', 'c1', 'c2', 'c3', 'c4'], 'a session of its own, a budget of its own');
  theirs.ws.close();
  await theirs.closed;
});

test.run();
