import { HttpError } from './errors.js';

/**
 * A request whose framing uWS reads more leniently than RFC 9112 allows, refused with `Connection: close`: of
 * Content-Length values that differ uWS takes the first, and of a Transfer-Encoding it only looks for `chunked`
 * anywhere in it, decoding the chunks and leaving any other coding undone. A proxy in front that reads such framing
 * the other way ends the request elsewhere, and the bytes in between become a request of their own (smuggling).
 * RFC 9112 6.3: differing lengths are a 400; 6.1: chunked must be the last coding, applied once. A coding the server
 * does not apply is a 400 too (RFC 9112 suggests 501, which no operation of the API document declares). A list of one
 * length repeated is that length.
 */
export function framingRefusal(headers: Readonly<Record<string, string>>): HttpError | undefined {
  const close = { connection: 'close' };
  const length = headers['content-length'];
  if (length !== undefined && length.includes(',')) {
    const values = length.split(',').map((value) => value.trim());
    if (values.some((value) => value !== values[0])) {
      return new HttpError(400, 'content_length_invalid', 'the request has Content-Length values that differ', { headers: close });
    }
  }
  const coding = headers['transfer-encoding'];
  if (coding === undefined) return undefined;
  const codings = coding.split(',').map((c) => c.trim().toLowerCase());
  if (codings.at(-1) !== 'chunked' || codings.indexOf('chunked') !== codings.length - 1) {
    return new HttpError(400, 'transfer_coding_invalid', 'Transfer-Encoding must end with chunked, applied once', { headers: close });
  }
  if (codings.length > 1) {
    return new HttpError(400, 'transfer_coding_unsupported', 'the only transfer coding this server applies is chunked', { headers: close });
  }
  return undefined;
}

/** Whether the request says a body follows (a length above 0, or chunks). */
export function hasBody(headers: Readonly<Record<string, string>>): boolean {
  const declared = headers['content-length'];
  return /chunked/i.test(headers['transfer-encoding'] ?? '') || (declared !== undefined && declared !== '0');
}
