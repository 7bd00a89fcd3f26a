import { renderError, type HttpError } from '../http/errors.js';
import { writeReply, type AbortWatch } from '../http/reply-writer.js';
import { requestHeaders, type HttpRequest, type HttpResponse } from '../uws.js';

/**
 * The WebSocket upgrade request as `authenticate` sees it. uWS's HttpRequest lives on the stack and is gone after the
 * first await, so everything is copied out of it synchronously into this plain value.
 */
export interface UpgradeRequest {
  readonly requestId: string;
  /** Upper case, as sent. */
  readonly method: string;
  /** Path only, without the query string. */
  readonly url: string;
  /** Raw query string, without the `?`; empty when there is none. */
  readonly query: string;
  /** Values of the route pattern's `:name` segments. */
  readonly params: Readonly<Record<string, string>>;
  /** Every header, names lower case; repeated headers are joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly remoteAddress: string;
}

/** The `:name` segments of a uWS route pattern, in order (uWS hands their values back by index). */
export function routeParameterNames(pattern: string): readonly string[] {
  return pattern
    .split('/')
    .filter((segment) => segment.startsWith(':'))
    .map((segment) => segment.slice(1));
}

export function captureUpgradeRequest(
  res: HttpResponse,
  req: HttpRequest,
  parameterNames: readonly string[],
  requestId: string,
): UpgradeRequest {
  const headers = requestHeaders(req);
  const params: Record<string, string> = {};
  parameterNames.forEach((name, index) => {
    params[name] = req.getParameter(index);
  });
  return Object.freeze({
    requestId,
    method: req.getMethod().toUpperCase(),
    url: req.getUrl(),
    query: req.getQuery(),
    params: Object.freeze(params),
    headers: Object.freeze(headers),
    remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString('utf8'),
  });
}

/**
 * Answers the upgrade request with an HTTP error instead of switching protocols; `head`: the request was a HEAD, so
 * the headers go without the body. Written like every HTTP answer (reply-writer), so a client pipelining refused
 * upgrades without reading cannot make the server hold their answers.
 */
export function refuseUpgrade(res: HttpResponse, watch: AbortWatch, error: HttpError, requestId: string, head = false): void {
  const rendered = renderError(error, 'problem', requestId);
  const headers = { ...rendered.headers, 'content-type': rendered.contentType, 'cache-control': 'no-store', 'x-request-id': requestId };
  // Nothing waits on the outcome: a refusal holds no state that a cut or an abort would need to release.
  void writeReply(res, { status: rendered.status, headers, body: JSON.stringify(rendered.body), head }, watch);
}
