import type * as z from 'zod';

/**
 * Errors as the API shows them. The spec has two bodies:
 *   - a flat RFC 7807 `application/problem+json` Problem for runtime authorization, account policy, fencing and
 *     coordination failures (and for every error of routes that declare `errorFormat: 'problem'`);
 *   - a nested `application/json` ApiError (`{ "error": { … } }`) for validation, catalog and management failures.
 * Both carry a stable machine `code` and the `requestId`, which is also the `X-Request-Id` response header.
 */
export type ErrorFamily =
  | 'validation'
  | 'catalog'
  | 'management'
  | 'runtime'
  | 'account_policy'
  | 'fencing'
  | 'coordination'
  | 'internal';

/**
 * `oauth` is for OAuth endpoints (the token endpoint): RFC 6749's `{ error, error_description }`, which OAuth clients
 * read, plus the spec's stable `code` and `requestId`. An OAuth client can read nothing else, so it wins over the
 * families that are otherwise always Problems.
 */
export type ErrorFormat = 'problem' | 'api' | 'oauth';

/** Families whose failures are always Problems, whatever the route prefers. */
const PROBLEM_FAMILIES: ReadonlySet<ErrorFamily> = new Set(['runtime', 'account_policy', 'fencing', 'coordination']);

export interface ErrorDetail {
  /** JSON Pointer into the request part named by `in`. */
  readonly pointer: string;
  readonly in: 'body' | 'query' | 'path' | 'header';
  readonly code: string;
  readonly message: string;
}

export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  readonly family: ErrorFamily;
  readonly details: readonly ErrorDetail[];
  readonly headers: Readonly<Record<string, string>>;
  /** RFC 6749 error code for the `oauth` format; derived from the status when not given. */
  readonly oauthError: string | undefined;

  constructor(
    status: number,
    code: string,
    message: string,
    options: {
      family?: ErrorFamily;
      details?: readonly ErrorDetail[];
      headers?: Record<string, string>;
      oauthError?: string;
      cause?: unknown;
    } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = status;
    this.code = code;
    this.family = options.family ?? (status >= 500 ? 'internal' : 'validation');
    this.details = options.details ?? [];
    this.headers = options.headers ?? {};
    this.oauthError = options.oauthError;
  }
}

export interface ProblemBody {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: string;
  readonly requestId: string;
  readonly errors?: readonly ErrorDetail[];
}

export interface ApiErrorBody {
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly status: number;
    readonly requestId: string;
    readonly details?: readonly ErrorDetail[];
  };
}

export interface OAuthErrorBody {
  readonly error: string;
  readonly error_description: string;
  readonly code: string;
  readonly requestId: string;
}

export interface RenderedError {
  readonly status: number;
  readonly contentType: 'application/problem+json' | 'application/json';
  readonly headers: Readonly<Record<string, string>>;
  readonly body: ProblemBody | ApiErrorBody | OAuthErrorBody;
}

/** Characters RFC 6749 lets `error_description` carry: printable ASCII without `"` and `\`. */
const OAUTH_DESCRIPTION_FORBIDDEN = /[^\x20\x21\x23-\x5B\x5D-\x7E]/g;

/**
 * An `error_description` as RFC 6749 (4.1.2.1, 5.2) allows it: every other character becomes `?`. Descriptions may
 * echo what the request sent (an unknown scope, a repeated parameter's name), and a client may show the description:
 * what a third party put in the request must not reach it beyond that character set.
 */
export function oauthDescription(text: string): string {
  return text.replace(OAUTH_DESCRIPTION_FORBIDDEN, '?');
}

function oauthErrorOf(error: HttpError): string {
  if (error.oauthError) return error.oauthError;
  if (error.status === 401) return 'invalid_client';
  if (error.status >= 500) return error.status === 503 ? 'temporarily_unavailable' : 'server_error';
  return 'invalid_request';
}

/** Base of Problem `type` URIs; each code has its own, documented in the OpenAPI description. */
export const PROBLEM_TYPE_BASE = 'https://registry.platform.invalid/problems/';

const TITLES: Readonly<Record<number, string>> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  303: 'See Other',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  426: 'Upgrade Required',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export function statusTitle(status: number): string {
  return TITLES[status] ?? (status < 400 ? 'OK' : 'Error');
}

/**
 * Details a refusal lists at most. A request can be wrong in a great many places (a megabyte of body holds a hundred
 * thousand unknown members): listed whole, the answer was ten times the request, held until the client reads it.
 */
export const MAX_ERROR_DETAILS = 100;

/** The one place an error becomes a response body. */
export function renderError(error: HttpError, preferred: ErrorFormat, requestId: string): RenderedError {
  const format: ErrorFormat = preferred !== 'oauth' && PROBLEM_FAMILIES.has(error.family) ? 'problem' : preferred;
  const details = error.details.length > 0 ? error.details.slice(0, MAX_ERROR_DETAILS) : undefined;
  const message =
    error.details.length > MAX_ERROR_DETAILS ? `${error.message} (${error.details.length} problems; the first ${MAX_ERROR_DETAILS} are listed)` : error.message;
  if (format === 'oauth') {
    return {
      status: error.status,
      contentType: 'application/json',
      headers: error.headers,
      body: { error: oauthErrorOf(error), error_description: oauthDescription(error.message), code: error.code, requestId },
    };
  }
  if (format === 'problem') {
    return {
      status: error.status,
      contentType: 'application/problem+json',
      headers: error.headers,
      body: {
        type: PROBLEM_TYPE_BASE + error.code,
        title: statusTitle(error.status),
        status: error.status,
        detail: message,
        code: error.code,
        requestId,
        ...(details ? { errors: details } : {}),
      },
    };
  }
  return {
    status: error.status,
    contentType: 'application/json',
    headers: error.headers,
    body: {
      error: {
        code: error.code,
        message,
        status: error.status,
        requestId,
        ...(details ? { details } : {}),
      },
    },
  };
}

/** RFC 6901: `~` and `/` inside a member name are escaped, so the pointer names exactly that member. */
export const pointerToken = (name: string): string => name.replace(/~/g, '~0').replace(/\//g, '~1');

/** A zod failure as the API's error details: one per issue, each unknown member named by its own pointer. */
export function validationDetails(error: z.ZodError, part: ErrorDetail['in']): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  for (const issue of error.issues) {
    const base = issue.path.map((p) => `/${pointerToken(String(p))}`).join('');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) details.push({ pointer: `${base}/${pointerToken(key)}`, in: part, code: 'unrecognized', message: 'unknown member' });
    } else {
      details.push({ pointer: base, in: part, code: issue.code, message: issue.message });
    }
  }
  return details;
}

/** The detail for a string Postgres cannot keep (see storage/storable-text.ts), at `pointer`. */
export function unstorableTextDetail(pointer: string, part: ErrorDetail['in']): ErrorDetail {
  return { pointer, in: part, code: 'unstorable_text', message: 'contains U+0000 or an unpaired UTF-16 surrogate' };
}

/** What a draining node tells every new request on a connection it still has open, HTTP or WebSocket upgrade alike. */
export function serverDraining(): HttpError {
  return new HttpError(503, 'server_draining', 'this node is shutting down; retry on another node or shortly', {
    family: 'coordination',
    headers: { 'retry-after': '1', connection: 'close' },
  });
}
