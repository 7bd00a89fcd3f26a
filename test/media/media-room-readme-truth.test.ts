import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mediaControlAsyncApiText } from '../../media/media.feature.js';
import { emptyRoom, mediaRoomTimers } from '../../machines/media-room/media-room.state.js';
import { MEDIA_ROOM_KEY, mediaRoomKey } from '../../actors/media.actors.js';

/** The media-room README (served inside the media-v2-data-plane AsyncAPI) lists the kind's durable timers. */
test('"Durable deadlines": timers(snapshot) also holds `hosting`, which the list leaves out', () => {
  const room = { ...emptyRoom({ roomId: 'env_x.town-hall', scope: 'town-hall' }), hostedUntil: 1_000 };
  assert.equal(Object.keys(mediaRoomTimers(room)), ['hosting']);
  const text = JSON.parse(mediaControlAsyncApiText('http://127.0.0.1:8080')) as { info: { description: string } };
  const section = text.info.description.split('## Durable deadlines')[1] ?? '';
  assert.match(section, /`hosting`/, 'the Durable deadlines list names grace:<memberId> and offer:<memberId> only');
});

test('the room key the rules describe is the one MEDIA_ROOM_KEY takes: the Environment id as registered, a dot, the scope', () => {
  const text = JSON.parse(mediaControlAsyncApiText('http://127.0.0.1:8080')) as { info: { description: string } };
  const described = /with key `<environmentId>\.<scope>` \(([^)]*)\)/.exec(text.info.description)?.[1] ?? '';
  assert.ok(described.length > 0, 'the rules name the key');
  // Operators choose Environment ids (registry-admin environment register --id): no `env_` prefix, no fixed length.
  assert.ok(MEDIA_ROOM_KEY.test(mediaRoomKey('idas-world', 'town-hall')));
  assert.not.ok(MEDIA_ROOM_KEY.test(mediaRoomKey('env_0123456789abcdefghjkmnpqrs', 'town-hall')));
  assert.not.match(described, /env_/, `the rules say the key is ${described}`);
});

test.run();
