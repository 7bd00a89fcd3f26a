import { connect } from 'node:net';

/**
 * Fuzz requests on the wire: sent as raw bytes on a socket (so a test can send what fetch would refuse or normalise:
 * lone surrogates, NUL, repeated headers, unencoded query text), and every answer held to the rules any client input
 * must meet: no 5xx but a documented 503, the error format with a `code`, the request id.
 */

export interface RawRequest {
  readonly method: string;
  /** The request target exactly as written on the request line. */
  readonly target: string;
  /** Written in order, repeats kept, values as latin1 bytes. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body?: string | Buffer;
  /** Loopback source address: operations limited per client address see many clients. */
  readonly from?: string;
}

export interface RawResponse {
  readonly status: number;
  /** Names lower-case; repeats joined with `, `. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** Sends one request on its own connection and reads one answer (content-length or chunked framing). */
export function sendRaw(port: number, request: RawRequest, timeoutMs = 10_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', ...(request.from ? { localAddress: request.from } : {}) });
    let received = Buffer.alloc(0);
    const timer = setTimeout(() => finish(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const finish = (outcome: RawResponse | Error): void => {
      clearTimeout(timer);
      socket.destroy();
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const tryParse = (closed: boolean): void => {
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) {
        if (closed) finish(new Error(`connection closed without an answer (${received.length} bytes: ${received.toString('latin1').slice(0, 200)})`));
        return;
      }
      const [statusLine, ...lines] = received.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
      }
      const status = Number(statusLine!.split(' ')[1]);
      const rest = received.subarray(end + 4);
      if (request.method === 'HEAD' || status === 101 || status === 204 || status === 304) return finish({ status, headers, body: Buffer.alloc(0) });
      if (headers['content-length'] !== undefined) {
        const length = Number(headers['content-length']);
        if (rest.length >= length) finish({ status, headers, body: rest.subarray(0, length) });
        else if (closed) finish(new Error(`closed after ${rest.length} of ${length} body bytes`));
        return;
      }
      if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        const chunks: Buffer[] = [];
        let at = 0;
        for (;;) {
          const lineEnd = rest.indexOf('\r\n', at);
          if (lineEnd < 0) break;
          const size = parseInt(rest.subarray(at, lineEnd).toString('latin1'), 16);
          if (size === 0) return finish({ status, headers, body: Buffer.concat(chunks) });
          if (rest.length < lineEnd + 2 + size + 2) break;
          chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
          at = lineEnd + 2 + size + 2;
        }
      }
      if (closed) finish({ status, headers, body: rest });
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      tryParse(false);
    });
    socket.on('error', (error) => finish(error));
    socket.on('close', () => tryParse(true));
    const body = request.body === undefined ? undefined : Buffer.isBuffer(request.body) ? request.body : Buffer.from(request.body, 'utf8');
    const head = [`${request.method} ${request.target} HTTP/1.1`, 'Host: 127.0.0.1'];
    for (const [name, value] of request.headers) head.push(`${name}: ${value}`);
    if (body !== undefined && !request.headers.some(([name]) => name.toLowerCase() === 'content-length')) head.push(`Content-Length: ${body.length}`);
    socket.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), body ?? Buffer.alloc(0)]));
  });
}

/** The code and request id of an error body in any of the API's three formats (Problem, ApiError, OAuth). */
function errorFields(body: Record<string, unknown>): { code: unknown; requestId: unknown } {
  const nested = body.error;
  if (nested && typeof nested === 'object') return { code: (nested as Record<string, unknown>).code, requestId: (nested as Record<string, unknown>).requestId };
  return { code: body.code, requestId: body.requestId };
}

/**
 * What is wrong with an answer to client input, if anything: a 5xx (but a 503 the operation documents), no request id,
 * or an error body not in the spec's format.
 */
export function answerViolations(method: string, response: RawResponse, documented: ReadonlySet<number>): string[] {
  const out: string[] = [];
  const requestId = response.headers['x-request-id'];
  if (response.status >= 500 && !(response.status === 503 && documented.has(503))) out.push(`status ${response.status}`);
  if (!requestId) out.push('no X-Request-Id header');
  if (response.status < 400 || method === 'HEAD') return out;
  const type = (response.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (type === 'text/html') {
    // The authorization endpoint's refusals are pages for a person; they name the code and request id in meta tags.
    const page = response.body.toString('utf8');
    const code = /<meta name="registry-error-code" content="([^"]+)">/.exec(page)?.[1];
    const pageRequestId = /<meta name="registry-request-id" content="([^"]+)">/.exec(page)?.[1];
    if (!code) out.push('error page without a code');
    if (pageRequestId !== requestId) out.push(`error page's request id ${String(pageRequestId)} is not the header's ${String(requestId)}`);
    return out;
  }
  if (type !== 'application/json' && type !== 'application/problem+json') return [...out, `error body of type ${JSON.stringify(type)}`];
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(response.body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return [...out, 'error body is not JSON'];
  }
  const { code, requestId: bodyRequestId } = errorFields(body);
  if (typeof code !== 'string' || code === '') out.push('error body without a code');
  if (bodyRequestId !== requestId) out.push(`error body's requestId ${String(bodyRequestId)} is not the header's ${String(requestId)}`);
  return out;
}

/** One line of a fuzz failure: enough to replay it. */
export const describe = (request: RawRequest, caseName: string, response: RawResponse | Error): string =>
  `${caseName}: ${request.method} ${request.target.slice(0, 160)}${request.target.length > 160 ? '…' : ''} → ${
    response instanceof Error ? response.message : `${response.status} ${response.body.toString('utf8').slice(0, 300)}`
  }`;

/** Sends fuzz requests and keeps what broke the rules, with a count per area for the report. */
export class FuzzTally {
  readonly failures: string[] = [];
  sent = 0;
  #address = 0;
  constructor(
    readonly port: number,
    readonly seed: number,
  ) {}

  /** Sends `request` (from the next loopback source address unless it names one) and checks the answer. */
  /**
   * Sends `request` (from the next loopback source address unless it names one) and checks the answer. `unparsable`:
   * uWebSockets.js's HTTP parser refuses the request before the gateway sees it (an unknown method token, an
   * absolute-form target, a control character in a header) and closes the connection, or leaves it to its idle timeout,
   * without an answer; such a request must still never get a 5xx.
   */
  async check(caseName: string, request: RawRequest, documented: ReadonlySet<number>, unparsable = false): Promise<RawResponse | undefined> {
    this.sent += 1;
    const from = request.from ?? `127.0.0.${2 + (this.#address++ % 250)}`;
    try {
      const response = await sendRaw(this.port, { ...request, from }, unparsable ? 1_500 : 10_000);
      this.#count(response);
      const wrong = answerViolations(request.method, response, documented);
      if (wrong.length > 0) this.failures.push(`[${wrong.join('; ')}] ${describe(request, caseName, response)}`);
      return response;
    } catch (error) {
      if (unparsable) return undefined;
      this.failures.push(`[no answer] ${describe(request, caseName, error as Error)}`);
      return undefined;
    }
  }

  /** How many answers had each status and code: shows which layer the cases reached (credential, schema, handler). */
  readonly outcomes = new Map<string, number>();
  #count(response: RawResponse): void {
    let code = '';
    try {
      code = String(errorFields(JSON.parse(response.body.toString('utf8')) as Record<string, unknown>).code ?? '');
    } catch {
      // A success body or none: the status says enough.
    }
    const key = `${response.status}${code ? ` ${code}` : ''}`;
    this.outcomes.set(key, (this.outcomes.get(key) ?? 0) + 1);
  }

  /** The failures as one message (the first few: one defect tends to fail many cases), naming the seed to replay. */
  report(): string {
    return `${this.failures.length} of ${this.sent} fuzz requests broke the rules (FUZZ_SEED=${this.seed}):\n${this.failures.slice(0, 15).join('\n')}`;
  }
}
