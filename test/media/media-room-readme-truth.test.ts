import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mediaControlAsyncApiText } from '../../media/media.feature.js';
import { emptyRoom, mediaRoomTimers } from '../../machines/media-room/media-room.state.js';

/** The media-room README (served inside the media-v2-data-plane AsyncAPI) lists the kind's durable timers. */
test('"Durable deadlines": timers(snapshot) also holds `hosting`, which the list leaves out', () => {
  const room = { ...emptyRoom({ roomId: 'env_x.town-hall', scope: 'town-hall' }), hostedUntil: 1_000 };
  assert.equal(Object.keys(mediaRoomTimers(room)), ['hosting']);
  const text = JSON.parse(mediaControlAsyncApiText('http://127.0.0.1:8080')) as { info: { description: string } };
  const section = text.info.description.split('## Durable deadlines')[1] ?? '';
  assert.match(section, /`hosting`/, 'the Durable deadlines list names grace:<memberId> and offer:<memberId> only');
});

test.run();
