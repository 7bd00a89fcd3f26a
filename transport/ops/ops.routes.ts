import { timingSafeEqual } from 'node:crypto';
import * as z from 'zod';
import type { ActorHost } from '../../actors/actor-host.js';
import type { ActorStore, JournalEntry } from '../../storage/actor-store.js';
import { apiSchema } from '../http/api-schemas.js';
import type { CredentialVerifier } from '../http/credentials.js';
import { HttpError } from '../http/errors.js';
import { defineRoute, type AnyRoute } from '../http/route.js';
import { OPS_PAGE_DEFAULT, OPS_PAGE_MAX, opsPageLimit } from './ops-pages.js';

/**
 * The operator listener's routes: inspection of actors (live and persisted, with their journal) and Prometheus
 * metrics. They are served on a separate listener, bound to loopback unless OPS_TOKEN guards it, never on the public
 * port.
 */
const LiveActorSchema = apiSchema(
  'OpsLiveActor',
  z.object({
    kind: z.string(),
    key: z.string(),
    status: z.enum(['loading', 'live', 'stopped']),
    epoch: z.number().int(),
    version: z.number().int(),
    committedVersion: z.number().int(),
    state: z.unknown(),
    pendingEvents: z.number().int(),
    timers: z.record(z.string(), z.string()),
    activatedAt: z.string(),
    lastActivityAt: z.string(),
  }),
);

const LiveActorListSchema = apiSchema(
  'OpsLiveActorList',
  z.object({
    kinds: z.array(z.string()),
    actors: z.array(LiveActorSchema),
    count: z.number().int().describe('Actors on this page.'),
    total: z.number().int().describe('Live actors (of the kind asked for) on this node.'),
    next: z.string().optional().describe('Present when the page is full: pass it as `after` for the next page.'),
  }),
);

/** Journal entries an unrestorable actor's inspection carries. */
const RECENT_JOURNAL = 20;

const JournalEntrySchema = z.object({
  version: z.number().int(),
  epoch: z.number().int(),
  event: z.unknown(),
  at: z.string(),
  stateVersion: z.number().int().describe("The kind's state version the event's journal segment was written at (1 for segments from before versions)."),
});

const JournalSchema = apiSchema(
  'OpsActorJournal',
  z.object({
    kind: z.string(),
    key: z.string(),
    entries: z.array(JournalEntrySchema),
    nextBefore: z.number().int().optional(),
  }),
);

const ActorDetailSchema = apiSchema(
  'OpsActorDetail',
  z.object({
    kind: z.string(),
    key: z.string(),
    live: LiveActorSchema.nullable(),
    persisted: z
      .object({
        version: z.number().int().describe('Newest committed version (journal head).'),
        snapshotVersion: z.number().int().describe('Version of the stored snapshot the state was rebuilt from.'),
        epoch: z.number().int(),
        stateVersion: z
          .number()
          .int()
          .describe("The kind's state version the stored snapshot row was written at (1 for rows from before versions); each journal entry has its own."),
        currentStateVersion: z
          .number()
          .int()
          .describe('The state version this build writes for the kind: a lower stored one is upgraded step by step when loaded (and stored at this one by the next write); a higher one does not restore.'),
        snapshot: z
          .unknown()
          .describe('The committed state: stored snapshot with the journal after it replayed; the stored snapshot as is when it does not restore.'),
        timers: z.record(z.string(), z.string()),
        updatedAt: z.string(),
        restores: z
          .boolean()
          .describe('False when the stored state does not restore (the host refuses to activate the actor until a fixed build or an operator mends it).'),
        restoreError: z.string().optional().describe('Why it does not restore: what the kind\'s code threw, the gap in the journal, or what of it the machine no longer reads (a state it lacks, a journaled event it ignores).'),
        recentJournal: z
          .array(JournalEntrySchema)
          .optional()
          .describe(`When it does not restore: the newest ${RECENT_JOURNAL} journal entries, newest first (more under /journal).`),
      })
      .nullable(),
  }),
);


const ActorParams = z.strictObject({ kind: z.string().min(1).max(64), key: z.string().min(1).max(512) });

const journalEntry = (e: JournalEntry) => ({ version: e.version, epoch: e.epoch, event: e.event, at: e.at.toISOString(), stateVersion: e.stateVersion });

export interface OpsDependencies {
  readonly host: ActorHost;
  readonly store: ActorStore;
  readonly renderMetrics: () => string;
}

/**
 * The scheme is case-insensitive (RFC 9110 11.1); the rest is taken as sent rather than as token68, since OPS_TOKEN
 * may be any string the operator chose.
 */
const OPERATOR_BEARER = /^Bearer +(.+)$/is;

const LOOPBACK_HOST = /^(127\.\d+\.\d+\.\d+|\[::1\]|localhost)(:\d+)?$/;

export function operatorVerifier(token: string | undefined): CredentialVerifier {
  const expected = token === undefined ? undefined : Buffer.from(token);
  return (request) => {
    if (expected === undefined) {
      // Without a token the listener trusts loopback, so it must be reached as loopback: a web page that rebinds its
      // own name to 127.0.0.1 still sends that name as Host, and a browser always sends Origin on writes.
      if (!LOOPBACK_HOST.test(request.headers.host ?? '') || request.headers.origin !== undefined) {
        throw new HttpError(403, 'operator_host_refused', 'the operator listener answers loopback requests from operator tools only');
      }
      return { credential: 'operator', subject: 'operator@loopback' };
    }
    const given = Buffer.from(OPERATOR_BEARER.exec(request.headers.authorization ?? '')?.[1] ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new HttpError(401, 'operator_token_invalid', 'a valid operator token is required', {
        headers: { 'www-authenticate': 'Bearer realm="operator"' },
      });
    }
    return { credential: 'operator', subject: 'operator' };
  };
}

export function opsRoutes(deps: OpsDependencies): AnyRoute[] {
  const common = { tags: ['Operations'], credential: 'operator', errorFormat: 'api' } as const;
  const knownKind = (kind: string): void => {
    if (!deps.host.kinds.includes(kind)) throw new HttpError(404, 'actor_kind_unknown', `no actor kind ${kind}`, { family: 'catalog' });
  };
  return [
    defineRoute({
      ...common,
      operationId: 'getMetrics',
      method: 'get',
      path: '/metrics',
      summary: 'Prometheus metrics',
      responses: { 200: { description: 'Metrics in the Prometheus text format.', text: { mediaType: 'text/plain; version=0.0.4' } } },
      handler: async () => ({ status: 200, body: deps.renderMetrics() }),
    }),
    defineRoute({
      ...common,
      operationId: 'listLiveActors',
      method: 'get',
      path: '/actors',
      summary: 'Actors in memory, a page at a time',
      description:
        `Live actors of this node in (kind, key) order, ${OPS_PAGE_DEFAULT} a page unless \`limit\` says otherwise ` +
        `(at most ${OPS_PAGE_MAX}). A full page carries \`next\`; pass it as \`after\` for the page after it. Actors ` +
        'come and go between pages (activations, passivation): a page holds those live when it was made.',
      query: z.strictObject({
        kind: z.string().min(1).max(64).optional(),
        limit: opsPageLimit,
        after: z.string().min(3).max(600).optional().describe('The `next` of the previous page (`kind/key` of its last actor).'),
      }),
      responses: { 200: { description: 'Live actors, optionally of one kind.', schema: LiveActorListSchema } },
      handler: async ({ query }) => {
        if (query.kind !== undefined) knownKind(query.kind);
        let after: { kind: string; key: string } | undefined;
        if (query.after !== undefined) {
          const slash = query.after.indexOf('/');
          if (slash < 1 || slash === query.after.length - 1) {
            const message = 'after is the `next` of a previous page: kind/key';
            throw new HttpError(400, 'validation_failed', message, { details: [{ pointer: '/after', in: 'query', code: 'invalid', message }] });
          }
          after = { kind: query.after.slice(0, slash), key: query.after.slice(slash + 1) };
        }
        const { actors, total } = deps.host.listPage({ ...(query.kind !== undefined ? { kind: query.kind } : {}), limit: query.limit, ...(after ? { after } : {}) });
        const last = actors.at(-1);
        return {
          status: 200,
          body: {
            kinds: [...deps.host.kinds],
            actors: [...actors],
            count: actors.length,
            total,
            ...(actors.length === query.limit && last ? { next: `${last.kind}/${last.key}` } : {}),
          },
        };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'getActor',
      method: 'get',
      path: '/actors/{kind}/{key}',
      summary: 'One actor: live view and persisted snapshot',
      description:
        'The persisted state is the stored snapshot with the journal after it replayed. An actor whose stored state no ' +
        'longer restores (kind code throws on it, or its journal has a gap) is answered all the same, with `restores: ' +
        'false`, the reason, the stored snapshot as is and its newest journal entries: the host refuses to activate it ' +
        'until a fixed build or an operator mends it.',
      params: ActorParams,
      errors: [404],
      responses: { 200: { description: 'The actor.', schema: ActorDetailSchema } },
      handler: async ({ params }) => {
        knownKind(params.kind);
        const live = deps.host.inspect(params.kind, params.key) ?? null;
        const stored = await deps.host.inspectStored(params.kind, params.key);
        if (!live && !stored) throw new HttpError(404, 'actor_not_found', `no actor ${params.kind}/${params.key}`, { family: 'catalog' });
        let persisted = null;
        if (stored) {
          const common = {
            version: stored.version,
            snapshotVersion: stored.snapshotVersion,
            epoch: stored.epoch,
            stateVersion: stored.stateVersion,
            currentStateVersion: deps.host.kindStateVersion(params.kind),
            timers: Object.fromEntries(Object.entries(stored.timers).map(([n, due]) => [n, new Date(due).toISOString()])),
            updatedAt: stored.updatedAt.toISOString(),
          };
          if (stored.restores) persisted = { ...common, snapshot: stored.state, restores: true };
          else {
            const recent = await deps.store.readJournal(params.kind, params.key, { limit: RECENT_JOURNAL });
            persisted = { ...common, snapshot: stored.snapshot, restores: false, restoreError: stored.reason, recentJournal: recent.map(journalEntry) };
          }
        }
        return { status: 200, body: { kind: params.kind, key: params.key, live, persisted } };
      },
    }),
    defineRoute({
      ...common,
      operationId: 'getActorJournal',
      method: 'get',
      path: '/actors/{kind}/{key}/journal',
      summary: 'Recent accepted events of one actor, newest first',
      description:
        'Events the stored snapshot covers are kept ACTOR_JOURNAL_RETENTION_DAYS (default 30; 0 keeps all) after they ' +
        'were accepted; the events after the snapshot always stay, since they are part of the state, and so do the ' +
        'newest commit\'s. An ended actor (a released, revoked or idled-out Runtime session) goes whole, journal and ' +
        'snapshot, ACTOR_ENDED_RETENTION_DAYS (default 30; 0 keeps them) after its end: its journal then reads empty, and ' +
        'the actor itself 404. A kind that keeps less goes sooner whatever these say: a Media room\'s covered events an ' +
        'hour after they were accepted, and the room whole an hour after its last member left.',
      params: ActorParams,
      query: z.strictObject({
        limit: z.coerce.number().int().min(1).max(500).default(50),
        before: z.coerce.number().int().min(1).optional().describe('Only versions below this one (paging).'),
      }),
      errors: [404],
      responses: { 200: { description: 'Journal entries.', schema: JournalSchema } },
      handler: async ({ params, query }) => {
        knownKind(params.kind);
        const entries = await deps.store.readJournal(params.kind, params.key, {
          limit: query.limit,
          ...(query.before !== undefined ? { beforeVersion: query.before } : {}),
        });
        const last = entries.at(-1);
        return {
          status: 200,
          body: {
            kind: params.kind,
            key: params.key,
            entries: entries.map(journalEntry),
            ...(entries.length === query.limit && last && last.version > 1 ? { nextBefore: last.version } : {}),
          },
        };
      },
    }),
  ];
}
