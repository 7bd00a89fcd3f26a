import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ManualClock } from '../../actors/clock.js';
import type { MediaWorkerPool } from '../../media/worker-pool.js';
import { PostgresActorStore } from '../../storage/postgres/actor-store.postgres.js';
import type { TestDatabase } from '../support/database.js';
import { asConnection, standInConnection, standInRooms, withDatabaseAndWorker } from '../support/media-stand-in.js';
import { meetingPolicy, T0 } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';

/**
 * A producer is announced (`producer.added`) only once the right to publish was checked again after it was made. A
 * member joining while that second check runs was listed the producer in its join answer; when the check then refused
 * it, the producer went without `producer.removed` (nobody else had been told of it), and that member's `consume` of
 * it was `producer_not_found` with nothing ever saying it had ended. Every producer a join answer lists is one the
 * room announced, or is followed by `producer.removed`.
 */
let db: TestDatabase;
let pool: MediaWorkerPool;
withDatabaseAndWorker(test, (setup) => ({ db, pool } = setup));

const MICROPHONE_RTP = { codecs: [{ mimeType: 'audio/opus', payloadType: 100, clockRate: 48_000, channels: 2 }], encodings: [{ ssrc: 22_222 }] };
const PUBLISHER = ['media:connect', 'media:join-space', 'media:request-speak', 'media:publish'];

function gate(): { readonly opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * The speaker's produce held in its second publish check (after a seat release while the authority answered, when
 * `releaseSeat`), a member joining meanwhile: the join answer's producers, the producer ids pushed to the joiner as
 * added and as removed, and how produce was answered.
 */
async function joinDuringRecheck(scope: string, releaseSeat: boolean) {
  const clock = new ManualClock(T0);
  const target = { kind: 'space', policy: meetingPolicy({ floorControl: 'open', roleAuthorityUrl: 'https://authority.example/publish' }), violations: [] } as const;
  const authority = gate();
  let authorityAsked = false;
  const recheck = gate();
  let checks = 0;
  let recheckHeld = false;
  const { host, rooms } = standInRooms({
    store: new PostgresActorStore(db.connection),
    clock,
    pool,
    target,
    timerPollMs: 3_600_000,
    authorizePublisher: async () => {
      authorityAsked = true;
      await authority.opened;
      return { allowed: true, reason: 'ok' };
    },
    beforeSend: async (event) => {
      if (event.type !== 'publish.check' || event.memberId !== 'act_speaker' || ++checks !== 2) return;
      recheckHeld = true;
      await recheck.opened;
    },
  });
  const speaker = standInConnection('conn-s', 'act_speaker', scope, { scopes: PUBLISHER });
  const joiner = standInConnection('conn-j', 'act_joiner', scope);
  try {
    await rooms.request(asConnection(speaker), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never);
    const { transportId } = (await rooms.request(asConnection(speaker), { type: 'transport.create', id: 't', direction: 'send' } as never)) as { transportId: string };

    const producing = rooms
      .request(asConnection(speaker), { type: 'produce', id: 'p', transportId, kind: 'audio', source: 'microphone', rtpParameters: MICROPHONE_RTP } as never)
      .then(() => 'ok', (error: unknown) => (error as { code?: string }).code ?? String(error));
    // A seat that goes while the authority answers has no producer to close yet: the second check is what refuses.
    await waitFor(() => authorityAsked, 'the publisher authority to be asked');
    if (releaseSeat) await rooms.request(asConnection(speaker), { type: 'floor.release', id: 'r' } as never);
    authority.open();
    await waitFor(() => recheckHeld, 'the producer to be made and checked again');

    const answer = (await rooms.request(asConnection(joiner), { type: 'room.join', id: 'j', rtpCapabilities: {} } as never)) as { producers: { producerId: string }[] };
    recheck.open();
    const produced = await producing;
    const pushed = (type: string): string[] =>
      joiner.sent.flatMap((m) => ((m as { type?: string }).type === type ? [(m as { producerId?: string; producer?: { producerId: string } }).producerId ?? (m as { producer: { producerId: string } }).producer.producerId] : []));
    return { listed: answer.producers.map((p) => p.producerId), added: pushed('producer.added'), removed: pushed('producer.removed'), produced };
  } finally {
    authority.open();
    recheck.open();
    await rooms.close();
    await host.drain();
  }
}

test('a join during the second publish check of a producer the check then refuses: not listed, or told it was removed', async () => {
  const { listed, removed, produced } = await joinDuringRecheck('recheck-refused', true);
  assert.is(produced, 'not_speaker');
  assert.equal(listed.filter((id) => !removed.includes(id)), [], 'listed to the joiner, refused, and never said removed');
});

test('a join during the second publish check of a producer the check confirms: the joiner learns of it once', async () => {
  const { listed, added, produced } = await joinDuringRecheck('recheck-confirmed', false);
  assert.is(produced, 'ok');
  assert.is(listed.length + added.length, 1, `listed ${JSON.stringify(listed)}, then added ${JSON.stringify(added)}`);
});

test.run();
