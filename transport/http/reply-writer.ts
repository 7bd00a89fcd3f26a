import type { HttpResponse } from '../uws.js';
import { statusTitle } from './errors.js';

/**
 * The one way an HTTP answer leaves this server: the gateway's replies (JSON, problem+json, text and HTML pages,
 * redirects, 204 and 304) and the WebSocket endpoints' upgrade refusals all go through `writeReply`.
 *
 * Why not `res.end(body)`: uWS copies whatever the socket does not take at once into a per-connection buffer and
 * reports the response finished, so the next pipelined request is served at once. A client that pipelines requests and
 * never reads made the server hold every answer: 2000 requests for the 192 KB OpenAPI document were 386 MB.
 *
 * `tryEnd` writes only what the socket takes and leaves the response unfinished; the rest is written from `onWritable`
 * as the client reads. While a response is unfinished, uWS closes its connection if another request arrives on it
 * (its HTTP parser refuses a request while the previous response is pending; test/transport/http-backpressure.test.ts
 * checks it), so one connection has at most one reply waiting: the body that reply already is, nothing more. A reply
 * whose client stops reading is closed by uWS's own 10 s write timeout. (Cutting a large reply early would save no
 * memory, since its body is built before it is written, and would cut readers of legitimately large answers, such as
 * the operator's list of live actors.)
 *
 * Not covered: an answer without a body (HEAD, 204, 304) has only headers, which uWS writes unconditionally, so a
 * client pipelining such requests without reading still grows that connection's uWS buffer by a few hundred bytes
 * per request. uWS.js 20.30 tells JavaScript neither which connection a response belongs to nor how much it buffers.
 */

/**
 * Whether the client went away. uWS keeps one abort handler per response, so its owner registers it once and
 * dispatches through `onAbort`, which the body reader and then the writer set while they wait.
 */
export interface AbortWatch {
  aborted: boolean;
  onAbort?: () => void;
}

/** Registers the response's abort handler; call it synchronously in the uWS handler, as uWS requires. */
export function watchAbort(res: HttpResponse): AbortWatch {
  const watch: AbortWatch = { aborted: false };
  res.onAborted(() => {
    watch.aborted = true;
    watch.onAbort?.();
  });
  return watch;
}

export interface OutgoingReply {
  readonly status: number;
  /** Written as given; a list repeats the header (`set-cookie`). */
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer | string;
  /** A HEAD request: the headers GET would send, its Content-Length included, and no body. */
  readonly head?: boolean;
}

const EMPTY = Buffer.alloc(0);

/** `sent`: handed to the socket in full. `aborted`: the client went away first (or uWS closed a stalled reply). */
export type ReplyOutcome = 'sent' | 'aborted';

/**
 * Writes `reply` corked and resolves when it is all handed to the socket or the client is gone. The
 * status and headers are written at once; a body is streamed as described above.
 */
export function writeReply(res: HttpResponse, reply: OutgoingReply, watch: AbortWatch): Promise<ReplyOutcome> {
  if (watch.aborted) return Promise.resolve('aborted');
  const body = typeof reply.body === 'string' ? Buffer.from(reply.body) : reply.body;
  const bodiless = reply.head === true || reply.status === 204 || reply.status === 304;
  // `Connection: close` (a 413 body refusal, a draining node) promises the client that the connection ends here (RFC
  // 9112 9.6), so a refused upload stops. uWS does not read the headers we write: written as a header only, the
  // connection stayed open and uWS went on receiving the refused body, without end for a chunked one. Only `end(body,
  // true)` makes uWS close it, once the answer is out; it writes the header itself. A bodiless answer cannot be ended
  // that way (uWS then writes a Content-Length of its own, wrong for HEAD, 204 and 304), so it promises nothing; except
  // a HEAD answer, which must close (a framing refusal, whose connection would otherwise serve the bytes a proxy took
  // for this request's body; a body refused or sent to no operation, which uWS would read to its end): it goes with
  // `Content-Length: 0` rather than GET's length, the only way uWS closes after an answer.
  const closing = reply.headers.connection === 'close';
  let startOffset = 0;
  let finished = true;
  res.cork(() => {
    res.writeStatus(`${reply.status} ${statusTitle(reply.status)}`);
    for (const [name, value] of Object.entries(reply.headers)) {
      if (closing && name === 'connection') continue;
      if (typeof value === 'string') res.writeHeader(name, value);
      else for (const each of value as readonly string[]) res.writeHeader(name, each);
    }
    if (reply.head && closing) res.end(EMPTY, true);
    else if (reply.head) endHead(res, reply.status, body.byteLength);
    // RFC 9110 8.6: no Content-Length on a 204, and on a 304 only the 200's (none is simpler); tryEnd adds one.
    else if (bodiless) res.endWithoutBody();
    // Closing answers are refusals with small bodies: held whole by uWS until written, then the connection closes.
    else if (closing) res.end(body, true);
    else {
      // The offset counts body bytes written by this response; kept so the tail resumes at the right byte.
      startOffset = res.getWriteOffset();
      finished = res.tryEnd(body, body.byteLength)[1];
    }
  });
  if (finished) return Promise.resolve('sent');
  return new Promise<ReplyOutcome>((resolve) => {
    watch.onAbort = () => resolve('aborted');
    res.onWritable((offset) => {
      const [ok, done] = res.tryEnd(body.subarray(offset - startOffset), body.byteLength);
      if (done) {
        watch.onAbort = undefined;
        resolve('sent');
      }
      // false: the socket took less than offered; uWS calls again when it drains.
      return ok;
    });
  });
}

/**
 * HEAD: the headers GET would send, Content-Length included (none for 204 and 304, RFC 9110), and no body. The length
 * is written as a header: given to endWithoutBody, uWS waits for that many body bytes and never finishes the response,
 * so the connection's next request goes unanswered and its idle timeout stops applying.
 */
function endHead(res: HttpResponse, status: number, contentLength: number): void {
  if (status !== 204 && status !== 304) res.writeHeader('content-length', String(contentLength));
  res.endWithoutBody();
}
