import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ContextPlaces } from '../../media/control/context-places.js';

/** The bookkeeping of maxParticipantsPerContext on its own; the socket over real upgrades is media-context-limit*. */

test('a room takes members up to its limit and refuses the next; a place given back goes to the next to ask', () => {
  const places = new ContextPlaces(2);
  const alice = places.take('env.plaza', 'alice');
  assert.ok(places.take('env.plaza', 'bob'));
  assert.is(places.take('env.plaza', 'carol'), undefined);
  alice!();
  assert.ok(places.take('env.plaza', 'carol'));
  assert.is(places.take('env.plaza', 'alice'), undefined);
});

test('rooms are counted apart', () => {
  const places = new ContextPlaces(1);
  assert.ok(places.take('env.plaza', 'alice'));
  assert.ok(places.take('env.annex', 'bob'));
  assert.ok(places.take('other.plaza', 'carol'));
});

test('a member holding a place gets in again when the room is full, and counts once until every hold is given back', () => {
  const places = new ContextPlaces(2);
  const first = places.take('env.plaza', 'alice');
  assert.ok(places.take('env.plaza', 'bob'));
  const reconnect = places.take('env.plaza', 'alice');
  assert.ok(reconnect, 'a reconnect into a full room');
  first!();
  assert.is(places.take('env.plaza', 'carol'), undefined, 'alice still holds her place through the reconnect');
  reconnect!();
  assert.ok(places.take('env.plaza', 'carol'));
});

test('giving a place back twice gives it back once', () => {
  const places = new ContextPlaces(2);
  const alice = places.take('env.plaza', 'alice');
  const again = places.take('env.plaza', 'alice');
  assert.ok(places.take('env.plaza', 'bob'));
  alice!();
  alice!();
  assert.is(places.take('env.plaza', 'carol'), undefined, 'the second call must not give back the reconnect\'s hold');
  again!();
  assert.ok(places.take('env.plaza', 'carol'));
});

test.run();
