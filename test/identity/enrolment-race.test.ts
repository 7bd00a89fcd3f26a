import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DeviceClient } from '../../client/device-client.js';
import { productParts } from '../../server/main.js';
import { enrolAnother, enrolFirst, requestEnrolment, startEnrolment } from '../support/identity.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * Enrolment operations sent together end as one of their serial orders would: the account and handle actors take
 * them one at a time. One decision per enrolment, one account per new handle, never an account without an active
 * device; every loser gets its Problem (409/403/404), never a 500.
 */
let server: TestServer;
withTestServer(test, (started) => ({ server } = started), productParts);

// Each enrolment start comes from an address of its own: starts are limited per client address.
let address = 1;
const nextAddress = (): string => `127.0.${Math.floor(++address / 250)}.${(address % 250) + 2}`;

const codeOf = async (res: Response): Promise<string> => (res.status < 300 ? String(res.status) : `${res.status} ${String(((await res.json()) as { code?: string }).code)}`);

test('admit and refuse from two devices, and completions, at once: one decision, and the completion follows it', async () => {
  const { device: a } = await enrolFirst(server.url, 'dora', nextAddress());
  const b = await enrolAnother(server.url, 'dora', a, 'dora phone', nextAddress());
  for (let round = 0; round < 20; round++) {
    const joiner = await DeviceClient.generate(`joiner ${round}`);
    const started = await startEnrolment(server.url, 'dora', joiner, nextAddress());
    const decisions = [['admit', a], ['refuse', b], ['refuse', a], ['admit', b]] as const;
    const complete = () => joiner.request(server.url, 'POST', '/v1/enrol/complete', { enrolmentId: started.enrolmentId, nonce: started.nonce });
    const [decided, completed] = await Promise.all([
      Promise.all(decisions.map(([decision, by]) => by.request(server.url, 'POST', '/v1/enrol/approve', { enrolmentId: started.enrolmentId, decision }))),
      Promise.all([complete(), complete()]),
    ]);
    const answers = await Promise.all(decided.map(codeOf));
    const won = answers.flatMap((answer, i) => (answer === '204' ? [decisions[i]![0]] : []));
    assert.is(won.length, 1, `round ${round}: ${answers.join(', ')}`);
    // A refusal that a completion has seen is gone with it: a decision after that finds no enrolment.
    const late = won[0] === 'refuse' ? ['404 enrolment_not_found'] : [];
    for (const answer of answers) assert.ok(['204', '409 enrolment_already_decided', ...late].includes(answer), `round ${round}: ${answers.join(', ')}`);
    const allowed = won[0] === 'admit' ? ['201', '409 enrolment_pending'] : ['409 enrolment_pending', '403 enrolment_refused', '404 enrolment_not_found'];
    for (const answer of await Promise.all(completed.map(codeOf))) assert.ok(allowed.includes(answer), `round ${round}: ${won[0]} won, completion answered ${answer}`);
    // Afterwards the decision holds: admitted completes (again), refused never does.
    const after = await codeOf(await complete());
    assert.ok(won[0] === 'admit' ? after === '201' : after !== '201', `round ${round}: ${won[0]} won, a later completion answered ${after}`);
  }
});

test('one new handle started four times at once: one account gets it, the others are told it is taken', async () => {
  for (let round = 0; round < 20; round++) {
    const devices = await Promise.all(Array.from({ length: 4 }, (_, i) => DeviceClient.generate(`device ${i}`)));
    const answers = await Promise.all(devices.map((d) => requestEnrolment(server.url, `twice-${round}`, d, nextAddress())));
    const codes = answers.map((a) => (a.status === 201 ? `201 ${(JSON.parse(a.text) as { proof: string }).proof}` : `${a.status} ${(JSON.parse(a.text) as { code: string }).code}`));
    assert.is(codes.filter((c) => c === '201 possession').length, 1, `round ${round}: ${codes.join(', ')}`);
    assert.is(codes.filter((c) => c === '409 handle_unavailable').length, 3, `round ${round}: ${codes.join(', ')}`);
  }
});

test('the two devices of an account signing out at once: one leaves, the other stays as its last device', async () => {
  for (let round = 0; round < 10; round++) {
    const handle = `pair-${round}`;
    const { device: a } = await enrolFirst(server.url, handle, nextAddress());
    const b = await enrolAnother(server.url, handle, a, 'second', nextAddress());
    const answers = await Promise.all(
      [a, b].map(async (d) => codeOf(await d.request(server.url, 'POST', '/v1/account/sign-out'))),
    );
    assert.equal([...answers].sort(), ['204', '409 last_device'], `round ${round}: ${answers.join(', ')}`);
    const stayed = answers[0] === '204' ? b : a;
    assert.is((await stayed.request(server.url, 'GET', '/v1/account/devices')).status, 200);
  }
});

test.run();
