import type * as z from 'zod';
import type { Clock } from '../../../actors/clock.js';
import { OpenApiDocumentSchema, PlatformStatusResponseSchema } from '../api-schemas.js';
import { defineRoute, type AnyRoute, type FixedJson } from '../route.js';

/** The spec's first tables declare these Problem responses on every operation, status reads included. */
export const PROBLEM_TABLE_STATUSES: readonly number[] = [400, 401, 403, 404, 409, 422, 429, 500, 502, 503];

export interface StatusDependencies {
  readonly nodeId: string;
  readonly mode: 'single-node' | 'cluster';
  readonly startedAt: number;
  readonly clock: Clock;
  /** Resolves when storage answers. */
  readonly pingStorage: () => Promise<void>;
  readonly storageTimeoutMs: number;
  /** True once the node has started to shut down. */
  readonly draining: () => boolean;
  /** The OpenAPI document, built once from the full route table (again once listening); sent as built, not re-serialised. */
  readonly openApiDocument: () => FixedJson<Readonly<Record<string, unknown>>>;
}

type PlatformStatus = z.input<typeof PlatformStatusResponseSchema>;

/**
 * Storage is asked at most once per this window, however many ask meanwhile: the status reads take no credential, and
 * a query each would let anyone turn a flood of cheap GETs into a flood of queries queued ahead of real work.
 */
export const STORAGE_CHECK_FRESH_MS = 1_000;

type StorageCheck = PlatformStatus['checks']['storage'];

export function statusRoutes(deps: StatusDependencies): AnyRoute[] {
  let lastCheck: { readonly at: number; readonly result: Promise<StorageCheck> } | undefined;
  const checkStorage = (): Promise<StorageCheck> => {
    const now = performance.now();
    if (lastCheck && now - lastCheck.at < STORAGE_CHECK_FRESH_MS) return lastCheck.result;
    const result = withTimeout(deps.pingStorage(), deps.storageTimeoutMs).then(
      (): StorageCheck => ({ status: 'ok', latencyMs: Math.round((performance.now() - now) * 100) / 100 }),
      (): StorageCheck => ({ status: 'unavailable' }),
    );
    lastCheck = { at: now, result };
    return result;
  };
  const status = async (): Promise<PlatformStatus> => {
    const storage = await checkStorage();
    return {
      status: deps.draining() ? 'draining' : storage.status === 'ok' ? 'ok' : 'unavailable',
      apiVersion: '0.1.0-alpha.7',
      mode: deps.mode,
      nodeId: deps.nodeId,
      time: new Date(deps.clock.now()).toISOString(),
      startedAt: new Date(deps.startedAt).toISOString(),
      checks: { storage },
    };
  };

  return [
    defineRoute({
      operationId: 'getReadiness',
      method: 'get',
      path: '/ready',
      summary: 'Readiness of this node',
      description:
        'Answers 200 when this node can serve (its storage answers), 503 otherwise (storage unavailable, or the node ' +
        'draining before it stops); for load balancers. Served while draining, like `/v1/status`. Storage is asked ' +
        'at most once a second, however many ask: an answer may be up to a second old.',
      tags: ['Status'],
      credential: 'none',
      servesWhileDraining: true,
      errorFormat: 'problem',
      errors: PROBLEM_TABLE_STATUSES,
      responses: {
        200: { description: 'The node is ready.', schema: PlatformStatusResponseSchema },
        503: { description: 'The node cannot serve now.', schema: PlatformStatusResponseSchema },
      },
      handler: async () => {
        const body = await status();
        return body.status === 'ok' ? { status: 200, body } : { status: 503, body, headers: { 'retry-after': '5' } };
      },
    }),
    defineRoute({
      operationId: 'getPlatformStatus',
      method: 'get',
      path: '/v1/status',
      summary: 'Platform status',
      description:
        'Health of this node and of what it depends on. Always 200: the body says what is unavailable. Storage is ' +
        'asked at most once a second, however many ask: an answer may be up to a second old.',
      tags: ['Status'],
      credential: 'none',
      servesWhileDraining: true,
      errorFormat: 'problem',
      errors: PROBLEM_TABLE_STATUSES,
      responses: { 200: { description: 'Status of this node.', schema: PlatformStatusResponseSchema } },
      handler: async () => ({ status: 200, body: await status() }),
    }),
    defineRoute({
      operationId: 'getOpenApiDocument',
      method: 'get',
      path: '/v1/openapi.json',
      summary: 'This API description',
      description: 'The OpenAPI 3.1.0 description of the `/v1` API, generated from the route table that serves it.',
      tags: ['Status'],
      credential: 'none',
      errorFormat: 'api',
      responses: { 200: { description: 'The OpenAPI document.', schema: OpenApiDocumentSchema } },
      handler: async () => ({ status: 200, body: deps.openApiDocument() as FixedJson<z.input<typeof OpenApiDocumentSchema>> }),
    }),
  ];
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
