import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../../server/config.js';
import { productParts } from '../../server/main.js';
import { startServer, type RunningServer } from '../../server/server.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { mediaGrant, mediaWorld, MediaControlClient, MEDIA_TEST_ENV } from '../support/media-control.js';
import { meetingPolicy } from '../support/media-room.js';
import { waitFor } from '../support/wait.js';
import { captureLogs } from '../support/log-capture.js';

/** A media control socket's log lines say which room and member they are about, and never carry the grant. */
const { logger, raw: lines } = captureLogs('debug');

let db: TestDatabase;
let server: RunningServer & { url: string; opsUrl: string };

test.before(async () => {
  db = await createTestDatabase();
  const config = loadConfig({ DATABASE_URL: db.url, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', ...MEDIA_TEST_ENV });
  const started = await startServer(config, productParts, { logger });
  server = { ...started, url: `http://127.0.0.1:${started.port}`, opsUrl: `http://127.0.0.1:${started.opsPort}` };
});
test.after(async () => {
  await server.stop('test over');
  await db.drop();
});

test('the media socket\'s lines carry its room and member, not its grant', async () => {
  const { world, modPage } = await mediaWorld(server, 'logged-media', {
    directCalls: { enabled: false },
    spaces: [{ id: 'hall', policy: meetingPolicy({ floorControl: 'open', raiseHand: 'disabled' }) }],
  });
  const grant = await mediaGrant(modPage, 'hall');
  const mod = await MediaControlClient.connect(server.url, grant, world.origin);
  const joined = await mod.request('room.join', { rtpCapabilities: {} });
  assert.is(joined.ok, true, JSON.stringify(joined.error));
  const memberId = (joined.result?.self as { memberId: string }).memberId;
  mod.close();
  const closed = await waitFor(
    () => lines.map((l) => JSON.parse(l) as { endpoint?: string; msg: string; roomKey?: string; memberId?: string }).find((l) => l.endpoint === 'media-control' && l.msg === 'connection closed'),
    'the close to be logged',
  );
  assert.equal([closed.roomKey, closed.memberId], [`${world.environmentId}.hall`, memberId], JSON.stringify(closed));
  assert.not.ok(lines.some((l) => l.includes(grant)), 'the grant was logged');
});

test.run();
