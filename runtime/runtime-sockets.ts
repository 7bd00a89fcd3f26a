import { LogThrottle } from '../actors/log-throttle.js';
import type { Clock, TimerHandle } from '../actors/clock.js';
import type { PresenceState } from '../machines/runtime-session/runtime-session.machine.js';
import type { LeaseHolder } from '../machines/runtime-lease/runtime-lease.machine.js';
import { LEASE_VERSION, type RuntimeCaller } from '../transport/http/credentials.js';
import { HttpError } from '../transport/http/errors.js';
import { socketBearer } from '../transport/ws/codecs.js';
import { defineWebSocketEndpoint, KeyedBudgets, type WebSocketEndpoint, type WsConnection } from '../transport/ws/endpoint.js';
import type { ControlTokens } from './control-tokens.js';
import { asCoordinationError, coordinated } from './coordination.js';
import { activityOrder, type RuntimeActivity, type RuntimeActivityEvent } from './runtime-activity.js';
import type { RuntimeSessions } from './runtime-sessions.js';
import {
  PRESENCE_PAGE_SIZE,
  RUNTIME_MAX_OUTBOUND_BYTES,
  RuntimeClientMessage,
  RuntimeCloseCode,
  type ControlServerMessage,
  type RuntimeServerMessage,
} from './runtime-socket.messages.js';
import { authorizationExpired, tokenInvalid, type RuntimeTokens } from './runtime-tokens.js';

export const RUNTIME_SOCKET_PATH = '/v1/runtime/socket';
export const CONTROL_SOCKET_PATH = '/v1/runtime/control';
/**
 * Heartbeat of both sockets (uWS): a connection silent for most of this is pinged, and one that has answered nothing,
 * not even the ping, by its end is cut. Told in the AsyncAPI document, since the cut carries no close frame.
 */
export const RUNTIME_SOCKET_IDLE_TIMEOUT_S = 60;
/**
 * Upgrades one session may make to each socket per minute (a burst of as many, refilled at that rate). Each upgrade
 * costs a sign-in query and a session read and replaces the session's previous socket, so a client holding a token
 * could otherwise loop upgrades. A page reconnecting after network blips (with any backoff) makes a handful a minute.
 */
export const RUNTIME_SOCKET_UPGRADES_PER_MINUTE = 20;
/** The Retry-After of an upgrade over its budget: the time one upgrade takes to refill. */
export const RUNTIME_SOCKET_UPGRADE_RETRY_AFTER_S = Math.ceil(60 / RUNTIME_SOCKET_UPGRADES_PER_MINUTE);
/**
 * Upgrades one person may make to each socket per minute in an Environment, whatever sessions they name. The runtime
 * socket's session budget is keyed by the `session` of the query, which the client names, and the control channel's by
 * its token's session, which a person makes (with its token) at will: a fresh session on every upgrade would get a fresh
 * budget (and push others' out of the bounded table), each attempt costing the sign-in query. The person (the token's
 * Environment and pairwise subject) is checked offline and cannot be minted without enrolling an account, and only one
 * page of theirs holds the lease the socket needs, so three sessions' worth leaves their other pages room.
 */
export const RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE = 3 * RUNTIME_SOCKET_UPGRADES_PER_MINUTE;
/** Presence hints to one Environment are coalesced over this long: a burst of changes costs one hint per socket. */
const HINT_COALESCE_MS = 100;

interface RuntimeSocketUser {
  readonly caller: RuntimeCaller;
  readonly sessionId: string;
  readonly leaseId: string;
  readonly leaseVersion: number;
  /** `RuntimeActivity.signInChanges` before the upgrade checked the sign-in: moved by the opening, it is checked again. */
  readonly signInChanges: number;
  unsubscribe?: () => void;
}

interface ControlSocketUser {
  readonly owner: { accountId: string; environmentId: string; origin: string };
  readonly sessionId: string;
  /** The sign-in (OAuth grant) the control token was issued under: the channel lives only as long as it does. */
  readonly grantId: string;
  /** As for the runtime socket: `RuntimeActivity.signInChanges` before the upgrade checked the sign-in. */
  readonly signInChanges: number;
  unsubscribe?: () => void;
}

type RuntimeConn = WsConnection<RuntimeSocketUser, RuntimeServerMessage>;
type ControlConn = WsConnection<ControlSocketUser, ControlServerMessage>;

interface Member {
  readonly actorId: string;
  state: PresenceState;
  since: number;
  readonly conn: RuntimeConn;
}

/** A member with its place in the Environment's join order: the cursor of `presence.list`. */
interface PlacedMember extends Member {
  readonly place: number;
}

type MemberView = Extract<RuntimeServerMessage, { type: 'presence.snapshot' }>['members'][number];

/** Who is present in each Environment, from this node's open runtime sockets. Ephemeral by nature: it is the sockets. */
class EnvironmentPresence {
  readonly #byEnvironment = new Map<string, Map<string, PlacedMember>>();
  /**
   * The same members in join order (ascending place), so a page is found by binary search and costs its own size
   * whatever the crowd: one list of everyone was O(N), and a crowd answering each hint O(N²). Places only grow, so a
   * join appends; a leave shifts the array (a memmove of N pointers), which is cheaper than any tree for the crowds of
   * one node. `set` (presence.update, the busy path) does not touch it: a member's place never changes.
   */
  readonly #inOrder = new Map<string, PlacedMember[]>();
  readonly #pendingHints = new Set<string>();
  #places = 0;

  constructor(private readonly clock: Clock) {}

  join(environmentId: string, sessionId: string, member: Member): void {
    let members = this.#byEnvironment.get(environmentId);
    let order = this.#inOrder.get(environmentId);
    if (!members || !order) {
      this.#byEnvironment.set(environmentId, (members = new Map()));
      this.#inOrder.set(environmentId, (order = []));
    }
    const previous = members.get(sessionId);
    if (previous) order.splice(placeIndex(order, previous.place), 1);
    const placed: PlacedMember = { ...member, place: ++this.#places };
    members.set(sessionId, placed);
    order.push(placed);
    this.#hint(environmentId);
  }

  /** Removes the session's member if `conn` is still the one holding its place. */
  leave(environmentId: string, sessionId: string, conn: RuntimeConn): void {
    const members = this.#byEnvironment.get(environmentId);
    const member = members?.get(sessionId);
    if (!members || member?.conn !== conn) return;
    members.delete(sessionId);
    const order = this.#inOrder.get(environmentId)!;
    order.splice(placeIndex(order, member.place), 1);
    if (members.size === 0) {
      this.#byEnvironment.delete(environmentId);
      this.#inOrder.delete(environmentId);
    } else this.#hint(environmentId);
  }

  set(environmentId: string, sessionId: string, state: PresenceState, at: number): void {
    const member = this.#byEnvironment.get(environmentId)?.get(sessionId);
    if (!member || member.state === state) return;
    member.state = state;
    member.since = at;
    this.#hint(environmentId);
  }

  /** The page of members after the place `after` (from the start without it), in join order. */
  page(environmentId: string, after: number | undefined): { members: MemberView[]; total: number; next?: string } {
    const order = this.#inOrder.get(environmentId) ?? [];
    const from = after === undefined ? 0 : placeIndex(order, after + 1);
    const members = order.slice(from, from + PRESENCE_PAGE_SIZE);
    const view = members.map((m) => ({ actorId: m.actorId, state: m.state, since: new Date(m.since).toISOString() }));
    const more = from + members.length < order.length;
    return { members: view, total: order.length, ...(more ? { next: String(members.at(-1)!.place) } : {}) };
  }

  #hint(environmentId: string): void {
    if (this.#pendingHints.has(environmentId)) return;
    this.#pendingHints.add(environmentId);
    this.clock.setTimeout(() => {
      this.#pendingHints.delete(environmentId);
      for (const member of this.#byEnvironment.get(environmentId)?.values() ?? []) member.conn.send({ type: 'hint', topic: 'presence' });
    }, HINT_COALESCE_MS);
  }
}

export interface RuntimeSocketDependencies {
  readonly tokens: RuntimeTokens;
  readonly sessions: RuntimeSessions;
  readonly controlTokens: ControlTokens;
  readonly activity: RuntimeActivity;
  readonly clock: Clock;
  readonly messagesPerMinute: number;
  readonly warn: (details: Record<string, unknown>, message: string) => void;
}

/** The index of the first member whose place is `place` or later (order.length when none is). */
function placeIndex(order: readonly PlacedMember[], place: number): number {
  let low = 0;
  let high = order.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (order[mid]!.place < place) low = mid + 1;
    else high = mid;
  }
  return low;
}

/**
 * The upgrade budgets of one socket, one per key (`whose`: a session, a person): taken before anything is read online
 * (the token already checked offline), so a refused upgrade costs the stores nothing. Over it: 429 `rate_limited` with
 * Retry-After.
 */
function upgradeBudgets(socket: string, clock: Clock, whose = "this session's", perMinute = RUNTIME_SOCKET_UPGRADES_PER_MINUTE): (key: string) => void {
  const budgets = new KeyedBudgets(perMinute);
  const retryAfterS = Math.ceil(60 / perMinute);
  return (key) => {
    const now = clock.now();
    if (budgets.budgetOf(key, now).take(now)) return;
    throw new HttpError(
      429,
      'rate_limited',
      `more than ${perMinute} upgrades of ${whose} ${socket} in a minute; retry in ${retryAfterS} s`,
      { family: 'runtime', headers: { 'retry-after': String(retryAfterS) } },
    );
  };
}

const closeFor = (reason: 'superseded' | 'released' | 'revoked' | 'lapsed'): number => RuntimeCloseCode[reason];

/**
 * The Runtime plane's two sockets.
 *
 * The runtime socket (`/v1/runtime/socket?session=…&lease=…&leaseVersion=…`) is for active sessions and holds the
 * fence: it is admitted only with the current lease, every message is checked against the lease actor's holder, and
 * the moment the lease moves (superseded, released, revoked, lapsed) the socket is told `lease.ended` and closed with
 * its code. While open it renews the lease, so an open page never lapses.
 *
 * The control channel (`/v1/runtime/control`) takes only a control token, is read-only (any client message closes it
 * with 1008), and streams the session's activity and browser-wide sign-out. One per session, as for the runtime
 * socket: a newer one replaces the older, which closes 4411.
 */
export function runtimeSockets(deps: RuntimeSocketDependencies): {
  runtime: WebSocketEndpoint<RuntimeSocketUser, RuntimeClientMessage, RuntimeServerMessage>;
  control: WebSocketEndpoint<ControlSocketUser, never, ControlServerMessage>;
  stop(): void;
} {
  const { sessions, activity, clock } = deps;
  const presence = new EnvironmentPresence(clock);

  const endLease = (conn: RuntimeConn, reason: 'superseded' | 'released' | 'revoked' | 'lapsed'): void => {
    if (conn.closed) return;
    conn.send({ type: 'lease.ended', reason });
    conn.close(closeFor(reason), `lease ${reason}`);
  };

  /** Whether the socket's lease is still the person's current one; when not, the socket is told why and closed. */
  const holdsLease = (conn: RuntimeConn, holder: LeaseHolder | null): boolean => {
    const { sessionId, leaseId, leaseVersion } = conn.user;
    if (holder?.sessionId === sessionId && holder.leaseId === leaseId && holder.version === leaseVersion) return true;
    // Nobody else holds it: the session ended (released or revoked while this socket was admitted), or its lease lapsed.
    endLease(conn, holder && holder.sessionId !== sessionId ? 'superseded' : (sessions.committedEnd(sessionId) ?? 'lapsed'));
    return false;
  };

  /**
   * The open control channels on this node, one per session, like the runtime sockets: a session is one page (each tab
   * creates its own), so a second channel of a session is that page reconnecting before its old channel died. The
   * newer replaces the older (4411). Without the bound one control token, replayed for its five minutes, could hold
   * any number of channels, each a subscription and a buffer on the server.
   */
  const controlBySession = new Map<string, ControlConn>();
  /**
   * The open runtime sockets, one per session: a newer one replaces the older (a page reconnecting before its old
   * socket died), which is closing and no longer renewed or checked.
   */
  const bySession = new Map<string, RuntimeConn>();
  /**
   * A round checks every socket: with Postgres gone each of them fails alike, which is one fault, not a line per socket
   * per round (thousands a minute on a busy node).
   */
  const quiet = new LogThrottle({ info: deps.warn, warn: deps.warn, error: deps.warn });
  const endControl = (conn: ControlConn): void => conn.close(RuntimeCloseCode.revoked, 'sign-in ended');

  /**
   * A sign-in can end without its sessions hearing (a device signed out or removed raises the account epoch; a reused
   * authorization code revokes its grant): the sockets made under it close, checked online for each sign-in once.
   */
  const checkSignIns = (runtimeConns: Iterable<RuntimeConn>, controlConns: Iterable<ControlConn>): void => {
    const byGrant = new Map<string, Array<() => void>>();
    const add = (grantId: string, end: () => void): void => {
      const ends = byGrant.get(grantId);
      if (ends) ends.push(end);
      else byGrant.set(grantId, [end]);
    };
    for (const conn of runtimeConns) add(conn.user.caller.grantId, () => endLease(conn, 'revoked'));
    for (const conn of controlConns) add(conn.user.grantId, () => endControl(conn));
    for (const [grantId, ends] of byGrant) {
      deps.tokens.signInLive(grantId).then(
        (live) => {
          if (!live) for (const end of ends) end();
        },
        (err: unknown) => quiet.say('warn', 'sign-in check', { err }, 'sign-in check failed; retrying next round'),
      );
    }
  };

  // An open socket is a Runtime in use: keep its lease, and drop sockets whose lease moved without us hearing.
  let renewal: TimerHandle | undefined;
  const renewEvery = Math.max(1_000, Math.floor(sessions.leaseTtlMs / 3));
  const renewAll = (): void => {
    checkSignIns(bySession.values(), controlBySession.values());
    for (const conn of bySession.values()) {
      const { caller, sessionId, leaseId } = conn.user;
      sessions.renew(caller.accountId, { sessionId, leaseId }).then(
        (held) => {
          if (!held) endLease(conn, 'lapsed');
        },
        (err: unknown) => quiet.say('warn', 'lease renewal', { err, sessionId }, 'lease renewal failed; retrying next round'),
      );
    }
    renewal = clock.setTimeout(renewAll, renewEvery);
  };
  renewal = clock.setTimeout(renewAll, renewEvery);

  /**
   * messagesPerMinute is the session's, as its one socket is: a newer socket of the session (which replaces the older)
   * draws from the same bucket, so reconnecting does not buy a fresh burst.
   */
  const budgets = new KeyedBudgets(deps.messagesPerMinute);
  const runtimeUpgrade = upgradeBudgets('runtime socket', clock);
  const personUpgrade = upgradeBudgets('runtime socket', clock, "this person's", RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE);
  const controlUpgrade = upgradeBudgets('control channel', clock);
  const controlPersonUpgrade = upgradeBudgets('control channel', clock, "this person's", RUNTIME_SOCKET_UPGRADES_PER_PERSON_PER_MINUTE);

  const runtime = defineWebSocketEndpoint<RuntimeSocketUser, RuntimeClientMessage, RuntimeServerMessage>({
    path: RUNTIME_SOCKET_PATH,
    name: 'runtime',
    maxMessageBytes: 16 * 1024,
    // Holds for every message: presence comes in pages of PRESENCE_PAGE_SIZE, the rest are ids and the server's text
    // (a framework error over it goes without its details).
    maxOutboundMessageBytes: RUNTIME_MAX_OUTBOUND_BYTES,
    maxBackpressureBytes: 256 * 1024,
    idleTimeoutSeconds: RUNTIME_SOCKET_IDLE_TIMEOUT_S,
    messagesPerMinute: deps.messagesPerMinute,
    messageBudget: (user) => budgets.budgetOf(user.sessionId),
    logContext: (user) => ({ sessionId: user.sessionId }),
    inbound: RuntimeClientMessage,
    takesBearer: true,
    async authenticate(upgrade) {
      const signInChanges = activity.signInChanges;
      const query = new URLSearchParams(upgrade.query);
      const sessionId = query.get('session');
      // Keyed by the token's sign-in too: the session in the query is not yet known to be this caller's. The person's
      // first: a refused attempt then adds no key for a session the client named.
      const caller = await deps.tokens.caller(upgrade.headers, socketBearer(upgrade.headers), ({ grantId, environmentId, actorId }) => {
        personUpgrade(`${environmentId} ${actorId}`);
        runtimeUpgrade(`${grantId} ${sessionId ?? ''}`);
      });
      const leaseId = query.get('lease');
      const version = query.get('leaseVersion');
      const claimed = leaseId === null && version === null ? undefined : leaseId && version && LEASE_VERSION.test(version) ? { leaseId, version: Number(version) } : null;
      if (!sessionId) {
        throw new HttpError(400, 'runtime_session_required', 'connect with ?session=<id>&lease=<id>&leaseVersion=<n> of an active session', { family: 'runtime' });
      }
      if (claimed === null) {
        throw new HttpError(400, 'runtime_lease_required', 'connect with ?session=<id>&lease=<id>&leaseVersion=<n> of an active session', { family: 'runtime' });
      }
      const state = await sessions.requireLease(caller, sessionId, claimed);
      return { caller, sessionId, leaseId: state.lease!.leaseId, leaseVersion: state.lease!.version, signInChanges };
    },
    onOpen(conn) {
      const { caller, sessionId, leaseVersion } = conn.user;
      // The fence was checked at the upgrade. A supersession committed since then is told by no event this socket
      // could still hear, so the holding is checked again now, before it replaces anything: at once when the lease
      // actor is in memory (as it is right after the upgrade read it), else as soon as it answers (below). Nothing
      // runs between this check and the subscription.
      const known = sessions.committedLeaseHolder(caller.accountId);
      if (known && !holdsLease(conn, known.holder)) return;
      const previous = bySession.get(sessionId);
      bySession.set(sessionId, conn);
      previous?.close(RuntimeCloseCode.replaced, 'replaced by a newer socket of this session');
      const fromSession = activity.subscribe(sessionId, (event: RuntimeActivityEvent) => {
        if (event.type !== 'session.activity') return;
        if (event.status === 'superseded') endLease(conn, 'superseded');
        else if (event.status === 'released') endLease(conn, 'released');
        else if (event.status === 'revoked') endLease(conn, 'revoked');
        else if (event.status === 'standby') endLease(conn, 'lapsed');
      });
      const fromAccount = activity.subscribeAccount(caller.accountId, () => checkSignIns([conn], []));
      conn.user.unsubscribe = () => {
        fromSession();
        fromAccount();
      };
      // A sign-in that ended after the upgrade checked it, before the listener above existed, was told to nobody here.
      if (activity.signInChanges !== conn.user.signInChanges) checkSignIns([conn], []);
      presence.join(caller.environmentId, sessionId, { actorId: caller.actorId, state: 'available', since: clock.now(), conn });
      conn.send({ type: 'ready', sessionId, leaseVersion, actorId: caller.actorId });
      if (!known) {
        sessions.leaseHolder(caller.accountId).then(
          (holder) => void holdsLease(conn, holder),
          (err: unknown) => quiet.log(conn.logger, 'warn', 'lease check', { err }, 'lease check after the upgrade failed; the renewal round checks again'),
        );
      }
    },
    async onMessage(conn, message) {
      const { caller, sessionId } = conn.user;
      // Every message is checked against the lease first, reads too: a lease lapses at its deadline, and when no
      // renewal or timer has told this socket yet (an outage delays both) it must not go on reading presence. Outages
      // are told as such (`runtime_coordination_unavailable`), as on every Runtime call, not as a failure; caught here
      // rather than through `coordinated`, since this runs for the socket's busiest messages.
      try {
        const known = sessions.committedLeaseHolder(caller.accountId);
        if (!holdsLease(conn, known ? known.holder : await sessions.leaseHolder(caller.accountId))) return;
      } catch (error) {
        throw asCoordinationError(error);
      }
      switch (message.type) {
        case 'ping':
          conn.send({ type: 'pong', ...(message.ref ? { ref: message.ref } : {}) });
          return;
        case 'presence.list':
          conn.send({
            type: 'presence.snapshot',
            ...presence.page(caller.environmentId, message.after === undefined ? undefined : Number(message.after)),
            ...(message.ref ? { ref: message.ref } : {}),
          });
          return;
        case 'presence.update': {
          try {
            await sessions.presence(sessionId, message.state);
          } catch (error) {
            throw asCoordinationError(error);
          }
          presence.set(caller.environmentId, sessionId, message.state, clock.now());
          conn.send({ type: 'presence.updated', state: message.state, ...(message.ref ? { ref: message.ref } : {}) });
          return;
        }
      }
    },
    onClose(conn) {
      if (bySession.get(conn.user.sessionId) === conn) bySession.delete(conn.user.sessionId);
      conn.user.unsubscribe?.();
      presence.leave(conn.user.caller.environmentId, conn.user.sessionId, conn);
    },
  });

  const control = defineWebSocketEndpoint<ControlSocketUser, never, ControlServerMessage>({
    path: CONTROL_SOCKET_PATH,
    name: 'runtime-control',
    logContext: (user) => ({ sessionId: user.sessionId }),
    maxMessageBytes: 1024,
    maxBackpressureBytes: 64 * 1024,
    idleTimeoutSeconds: RUNTIME_SOCKET_IDLE_TIMEOUT_S,
    inbound: null,
    takesBearer: true,
    async authenticate(upgrade) {
      const signInChanges = activity.signInChanges;
      const token = socketBearer(upgrade.headers);
      const claims = token ? await deps.controlTokens.verify(token) : undefined;
      if (claims === 'expired') {
        throw authorizationExpired('the control token has expired; ask for a new one (POST /v1/runtime/control-token)');
      }
      if (!claims) {
        throw tokenInvalid('offer a valid control token as the subprotocol registry.bearer.<token>');
      }
      const origin = upgrade.headers.origin;
      if (origin === undefined || origin === '' || origin === 'null') {
        throw new HttpError(400, 'runtime_origin_required', 'the control channel must be opened with the Origin of the Environment page', { family: 'runtime' });
      }
      if (origin !== claims.origin) {
        throw new HttpError(403, 'runtime_origin_mismatch', 'the control token is bound to another origin', { family: 'runtime' });
      }
      // The person's too: a person makes sessions, and control tokens for them, at will. Theirs first, as on the
      // runtime socket: a refused attempt then adds no key for the session.
      controlPersonUpgrade(`${claims.environmentId} ${claims.actorId}`);
      controlUpgrade(claims.sessionId);
      // Online, like every Runtime call: without it the channel would be admitted from memory alone, after its
      // sign-in ended or while the stores cannot answer (then 503 runtime_coordination_unavailable: nobody admitted).
      const signIn = await coordinated(() => deps.tokens.liveSignIn(claims.grantId));
      if (!signIn) {
        throw authorizationExpired('the sign-in behind this control token has ended; sign in to the Environment again');
      }
      const owner = { accountId: signIn.accountId, environmentId: claims.environmentId, origin: claims.origin };
      await sessions.liveSession(owner, claims.sessionId);
      return { owner, sessionId: claims.sessionId, grantId: claims.grantId, signInChanges };
    },
    async onOpen(conn) {
      const { owner, sessionId } = conn.user;
      // Before anything awaits, so two channels opening together cannot both stay: the later one replaces.
      const previous = controlBySession.get(sessionId);
      controlBySession.set(sessionId, conn);
      previous?.close(RuntimeCloseCode.replaced, 'replaced by a newer control channel of this session');
      // Activities can be published in another order than they happened (racing activations); each carries its place
      // in the session's history, and one older than what the page was already told is dropped. Until the state at
      // connection is sent, activities wait, so `connected` is always the first message.
      let told = Number.NEGATIVE_INFINITY;
      let waiting: [RuntimeActivityEvent, number][] | undefined = [];
      const tell = (event: RuntimeActivityEvent, order: number): void => {
        if (order < told) return;
        told = order;
        conn.send(event);
        if (event.type === 'browser.signed_out') conn.close(RuntimeCloseCode.revoked, 'signed out');
        // A browser logout's `browser.signed_out` follows its `revoked`, and closes the channel then.
        else if (event.status === 'revoked' && event.reason !== 'browser_logout') conn.close(RuntimeCloseCode.revoked, 'session revoked');
        else if (event.status === 'released') conn.close(RuntimeCloseCode.released, 'session released');
      };
      const fromSession = activity.subscribe(sessionId, (event, order) => (waiting ? waiting.push([event, order]) : tell(event, order)));
      const fromAccount = activity.subscribeAccount(owner.accountId, () => checkSignIns([], [conn]));
      conn.user.unsubscribe = () => {
        fromSession();
        fromAccount();
      };
      // As for the runtime socket: a sign-in that ended during the upgrade was told before this channel listened.
      if (activity.signInChanges !== conn.user.signInChanges) checkSignIns([], [conn]);
      const state = await sessions.session(owner, sessionId);
      tell(
        {
          type: 'session.activity',
          sessionId,
          status: state.status,
          leaseVersion: state.lease?.version ?? null,
          reason: 'connected',
          at: new Date(clock.now()).toISOString(),
        },
        activityOrder(state.status, state.lease?.version ?? state.context.seenVersion),
      );
      const published = waiting;
      waiting = undefined;
      for (const [event, order] of published) tell(event, order);
    },
    onClose(conn) {
      if (controlBySession.get(conn.user.sessionId) === conn) controlBySession.delete(conn.user.sessionId);
      conn.user.unsubscribe?.();
    },
  });

  return {
    runtime,
    control,
    stop: () => {
      if (renewal) clock.clearTimeout(renewal);
    },
  };
}
