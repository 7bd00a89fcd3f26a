import { isUtf8 } from 'node:buffer';

/**
 * Checks that bytes are exactly one well-formed msgpack value before they are decoded, in one pass and without
 * allocating. The decoder pre-allocates every array and map at the length its header declares: a 16 KiB message of
 * nested `array 16` headers declaring 65,535 elements each makes it allocate gigabytes before it notices that the
 * elements are missing. Every declared element needs at least one byte, so a value whose headers declare more
 * elements than bytes remain is refused here, and what passes costs the decoder memory proportional to its size.
 * A str must hold UTF-8 (the msgpack spec's rule), which the decoder does not check: it reads other bytes as Latin-1
 * (short strings) or U+FFFD (long ones), so a client's text would be silently changed instead of refused (1007) as a
 * text frame that is not UTF-8 is.
 */
export function assertOneMsgpackValue(bytes: Uint8Array): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength;
  let at = 0;
  // Values still to read: msgpack is prefix-coded, so a count is all the state a well-formedness check needs.
  let expected = 1;
  const need = (n: number): void => {
    if (n > end - at) throw new RangeError(`msgpack value truncated at byte ${at}`);
  };
  const open = (elements: number): void => {
    expected += elements;
    if (expected > end - at) throw new RangeError(`msgpack container at byte ${at} declares more elements than bytes remain`);
  };
  while (expected > 0) {
    need(1);
    const type = bytes[at++]!;
    expected--;
    if (type <= 0x7f || type >= 0xe0 || type === 0xc0 || type === 0xc2 || type === 0xc3) continue;
    if (type <= 0x8f) open(2 * (type & 0x0f));
    else if (type <= 0x9f) open(type & 0x0f);
    else if (type <= 0xbf) text(type & 0x1f);
    else {
      switch (type) {
        case 0xc4: need(1); skip(view.getUint8(at), 1); break;
        case 0xc5: need(2); skip(view.getUint16(at), 2); break;
        case 0xc6: need(4); skip(view.getUint32(at), 4); break;
        case 0xd9: need(1); text(view.getUint8(at), 1); break;
        case 0xda: need(2); text(view.getUint16(at), 2); break;
        case 0xdb: need(4); text(view.getUint32(at), 4); break;
        case 0xc7: need(2); skip(view.getUint8(at) + 1, 1); break;
        case 0xc8: need(3); skip(view.getUint16(at) + 1, 2); break;
        case 0xc9: need(5); skip(view.getUint32(at) + 1, 4); break;
        case 0xcc: case 0xd0: skip(1); break;
        case 0xcd: case 0xd1: skip(2); break;
        case 0xca: case 0xce: case 0xd2: skip(4); break;
        case 0xcb: case 0xcf: case 0xd3: skip(8); break;
        case 0xd4: skip(2); break;
        case 0xd5: skip(3); break;
        case 0xd6: skip(5); break;
        case 0xd7: skip(9); break;
        case 0xd8: skip(17); break;
        case 0xdc: need(2); at += 2; open(view.getUint16(at - 2)); break;
        case 0xdd: need(4); at += 4; open(view.getUint32(at - 4)); break;
        case 0xde: need(2); at += 2; open(2 * view.getUint16(at - 2)); break;
        case 0xdf: need(4); at += 4; open(2 * view.getUint32(at - 4)); break;
        default: throw new RangeError(`byte 0x${type.toString(16)} at ${at - 1} starts no msgpack value`);
      }
    }
  }
  if (at !== end) throw new RangeError(`${end - at} bytes after the msgpack value`);

  /** Skips a length field of `header` bytes (already checked) and then `length` bytes of payload. */
  function skip(length: number, header = 0): void {
    at += header;
    need(length);
    at += length;
  }

  /** As skip, for a str: its payload must be UTF-8. */
  function text(length: number, header = 0): void {
    const start = at + header;
    skip(length, header);
    if (length > 0 && !isUtf8(bytes.subarray(start, at))) throw new RangeError(`msgpack str at byte ${start - header - 1} is not UTF-8`);
  }
}
