import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import { MediaRequestError } from '../../media/control/media-control.socket.js';
import type { MediaRooms } from '../../media/control/media-rooms.js';
import type { MediaWorkerPool } from '../../media/worker-pool.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { asConnection, standInConnection, standInRooms, withDatabaseAndWorker } from '../support/media-stand-in.js';
import { meetingPolicy, T0 } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';

/**
 * A call waiting on mediasoup when its worker dies is cut by the server's failure, not the client's: it is answered
 * `media_unavailable` (a MediaRequestError, which the socket logs as a refusal, not `internal_error` with an error
 * line), and the member gets exactly one `media.reset` once the room is served again, even when the cut call was its
 * first transport and nothing of it was on the dead worker (docs/media.md, Workers).
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

const PUBLISHER = ['media:connect', 'media:join-space', 'media:request-speak', 'media:publish'];
const MICROPHONE_RTP = { codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 44_444 }] };
const DTLS = { role: 'client', fingerprints: [{ algorithm: 'sha-256', value: Array.from({ length: 32 }, () => 'AB').join(':') }] };

type Member = ReturnType<typeof standInConnection>;

const resets = (member: Member): number => member.sent.filter((m) => (m as { type?: string }).type === 'media.reset').length;

/** The refusal's code if it is a refusal (MediaRequestError), `ok`, or what escaped as a failure of ours. */
const outcome = (call: Promise<unknown>): Promise<string> =>
  call.then(
    () => 'ok',
    (error: unknown) => (error instanceof MediaRequestError ? error.code : `unexpected ${String(error)}`),
  );

/**
 * Stops the worker, starts `call` (which reaches the stopped worker's channel and waits there), then kills the worker:
 * mediasoup aborts the pending request as the channel closes.
 */
async function cutByWorkerDeath(call: () => Promise<unknown>): Promise<string> {
  const pid = pool.workers()[0]!.pid;
  process.kill(pid, 'SIGSTOP');
  let answered = false;
  const answer = outcome(call()).finally(() => (answered = true));
  // Long enough for a request that first asks the room actor (Postgres) to be written to the worker.
  await new Promise((resolve) => setTimeout(resolve, 700));
  const inFlight = !answered;
  process.kill(pid, 'SIGKILL');
  assert.ok(inFlight, 'the call waited on the stopped worker');
  return answer;
}

async function inRoom(scope: string, body: (rooms: MediaRooms, join: (id: string, memberId: string) => Promise<Member>) => Promise<void>): Promise<void> {
  const clock = new ManualClock(T0);
  const target = { kind: 'space', policy: meetingPolicy({ floorControl: 'open' }), violations: [] } as const;
  const { host, rooms } = standInRooms({ store: new PostgresActorStore(db.connection), clock, pool, target, timerPollMs: 3_600_000 });
  const join = async (id: string, memberId: string): Promise<Member> => {
    const member = standInConnection(id, memberId, scope, { scopes: PUBLISHER });
    const { routerRtpCapabilities } = (await rooms.request(asConnection(member), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never)) as { routerRtpCapabilities: unknown };
    // Joined again with the room's own capabilities, so it can consume.
    await rooms.request(asConnection(member), { type: 'room.join', id: 'j2', rtpCapabilities: routerRtpCapabilities } as never);
    return member;
  };
  try {
    await body(rooms, join);
  } finally {
    await rooms.close();
    await host.drain();
  }
}

const ask = (rooms: MediaRooms, member: Member, message: Record<string, unknown>): Promise<Record<string, unknown>> =>
  rooms.request(asConnection(member), { id: 'r', ...message } as never);

/** After the cut: one media.reset, and the member is served again (a new transport); nothing else comes later. */
async function servedAgainAfterOneReset(rooms: MediaRooms, member: Member): Promise<number> {
  await waitFor(() => resets(member) > 0, 'media.reset for the cut call', 15_000);
  await waitFor(() => ask(rooms, member, { type: 'transport.create', direction: 'send' }).then(() => true, () => false), 'the room served again', 15_000);
  await new Promise((resolve) => setTimeout(resolve, 300));
  return resets(member);
}

test('transport.create cut (the member held no transport): media_unavailable, then one media.reset', async () => {
  await inRoom('cut-create', async (rooms, join) => {
    const member = await join('conn-a', 'act_a');
    const answer = await cutByWorkerDeath(() => ask(rooms, member, { type: 'transport.create', direction: 'send' }));
    assert.equal({ answer, resets: await servedAgainAfterOneReset(rooms, member) }, { answer: 'media_unavailable', resets: 1 });
  });
});

test('transport.connect cut: media_unavailable, then one media.reset', async () => {
  await inRoom('cut-connect', async (rooms, join) => {
    const member = await join('conn-a', 'act_a');
    const { transportId } = await ask(rooms, member, { type: 'transport.create', direction: 'send' });
    const answer = await cutByWorkerDeath(() => ask(rooms, member, { type: 'transport.connect', transportId, dtlsParameters: DTLS }));
    assert.equal({ answer, resets: await servedAgainAfterOneReset(rooms, member) }, { answer: 'media_unavailable', resets: 1 });
  });
});

test('produce cut: media_unavailable, then one media.reset', async () => {
  await inRoom('cut-produce', async (rooms, join) => {
    const member = await join('conn-a', 'act_a');
    const { transportId } = await ask(rooms, member, { type: 'transport.create', direction: 'send' });
    const answer = await cutByWorkerDeath(() => ask(rooms, member, { type: 'produce', transportId, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP }));
    assert.equal({ answer, resets: await servedAgainAfterOneReset(rooms, member) }, { answer: 'media_unavailable', resets: 1 });
  });
});

test('consume and consumer.resume cut: media_unavailable, then one media.reset', async () => {
  for (const call of ['consume', 'consumer.resume'] as const) {
    await inRoom(`cut-${call.replace('.', '-')}`, async (rooms, join) => {
      const speaker = await join('conn-s', 'act_s');
      const listener = await join('conn-l', 'act_l');
      const { transportId: send } = await ask(rooms, speaker, { type: 'transport.create', direction: 'send' });
      const { producerId } = await ask(rooms, speaker, { type: 'produce', transportId: send, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP });
      const { transportId: recv } = await ask(rooms, listener, { type: 'transport.create', direction: 'recv' });
      const consumeMessage = { type: 'consume', transportId: recv, producerId };
      const message = call === 'consume' ? consumeMessage : { type: 'consumer.resume', consumerId: (await ask(rooms, listener, consumeMessage)).consumerId };
      const answer = await cutByWorkerDeath(() => ask(rooms, listener, message));
      assert.equal({ call, answer, resets: await servedAgainAfterOneReset(rooms, listener) }, { call, answer: 'media_unavailable', resets: 1 });
    });
  }
});

test.run();
