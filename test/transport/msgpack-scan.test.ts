import { encode, ExtData } from '@msgpack/msgpack';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { jsonCodec, msgpackCodec } from '../../transport/ws/codecs.js';
import { assertOneMsgpackValue } from '../../transport/ws/msgpack-scan.js';

/** Plain values of every msgpack family (extensions below): each must pass the scan whole, and fail it cut short. */
const VALUES: readonly unknown[] = [
  null,
  true,
  false,
  0,
  127,
  -1,
  -32,
  -33,
  255,
  65_535,
  4_294_967_295,
  Number.MAX_SAFE_INTEGER,
  -2_147_483_649,
  0.5,
  Math.PI,
  123_456_789_012_345_678n,
  '',
  'x'.repeat(31),
  'y'.repeat(32),
  'z'.repeat(300),
  'é'.repeat(40_000),
  new Uint8Array(0),
  new Uint8Array(300),
  new Uint8Array(70_000),
  [],
  Array.from({ length: 15 }, (_, i) => i),
  Array.from({ length: 16 }, (_, i) => i),
  Array.from({ length: 70_000 }, () => 1),
  {},
  Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, i])),
  Object.fromEntries(Array.from({ length: 70_000 }, (_, i) => [`k${i}`, null])),
  { type: 'presence.update', state: 'away', nested: [[[{ deep: [1, { a: 'b' }] }]]] },
];

/** Extensions of every length class: fixext 1, 2, 4, 8, 16, then ext 8, 16 and 32. */
const EXTENSIONS = [1, 2, 4, 8, 16, 3, 300, 70_000].map((length) => new ExtData(7, new Uint8Array(length).fill(0xdc)));
/** Timestamps 32, 64 and 96 (before 1970: seconds negative). */
const DATES = [new Date(1_700_000_000_000), new Date(1_700_000_000_123), new Date(-1)];

test('every kind of value passes whole, and fails with a byte missing or a byte too many', () => {
  const encoded = [
    ...[...VALUES, ...EXTENSIONS, ...DATES].map((value) => encode(value, { useBigInt64: true })),
    encode([1.5, -0.25, { x: 3.75 }], { forceFloat32: true }),
  ];
  // The extension and timestamp families really are among them: fixext 1–16, ext 8/16/32, float 32.
  const leading = new Set(encoded.map((bytes) => bytes[0]));
  for (const type of [0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xc7, 0xc8, 0xc9]) assert.ok(leading.has(type), `type byte 0x${type.toString(16)}`);
  assert.ok(encoded.at(-1)!.includes(0xca), 'float 32');
  for (const bytes of encoded) {
    assertOneMsgpackValue(bytes);
    assert.throws(() => assertOneMsgpackValue(bytes.subarray(0, bytes.length - 1)), RangeError, `0x${bytes[0]!.toString(16)}… cut short`);
    const longer = new Uint8Array(bytes.length + 1);
    longer.set(bytes);
    assert.throws(() => assertOneMsgpackValue(longer), /after the msgpack value/);
  }
});

test('headers declaring more elements than bytes remain are refused before the decoder allocates for them', () => {
  const nestedArrays = Buffer.alloc(16_383, Buffer.from([0xdc, 0xff, 0xff]));
  const mapsUnderKeys = Buffer.alloc(16_380, Buffer.from([0xde, 0xff, 0xff, 0xa1, 0x6b])); // map 16, then a key 'k'
  const array32 = Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]);
  for (const bomb of [nestedArrays, mapsUnderKeys, array32]) {
    assert.throws(() => msgpackCodec.decode(new Uint8Array(bomb).buffer), /declares more elements than bytes remain|truncated/);
  }
  assert.throws(() => assertOneMsgpackValue(Buffer.from([0xc1])), /starts no msgpack value/);
  assert.throws(() => assertOneMsgpackValue(Buffer.from([0xdb, 0xff, 0xff, 0xff, 0xff, 0x61])), /truncated/);
});

test('both codecs carry the same message: an undefined member is left out by msgpack as by JSON', () => {
  const message = { type: 'transport.created', id: 't1', tcpType: undefined, encodings: [{ rid: undefined, ssrc: 1 }], nothing: null };
  const viaMsgpack = msgpackCodec.decode(new Uint8Array(msgpackCodec.encode(message) as Uint8Array).buffer);
  const viaJson = jsonCodec.decode(new TextEncoder().encode(jsonCodec.encode(message) as string).buffer);
  assert.equal(viaMsgpack, viaJson);
  assert.equal(viaMsgpack, { type: 'transport.created', id: 't1', encodings: [{ ssrc: 1 }], nothing: null });
});

test.run();
