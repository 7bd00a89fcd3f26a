import pg from 'pg';
import { answeredWithin, StoreSilentError } from './outage.js';

/** The advisory-lock key of single-node ownership: any constant, the same for every server of this code. */
const SINGLE_NODE_LOCK = 7_318_214_551_902_417n;
const RECLAIM_EVERY_MS = 2_000;
/**
 * How long Postgres lets the owner's connection stay silent before it ends it (`idle_session_timeout`), and with it the
 * lock; the owner says it is alive every HEARTBEAT_MS. A server killed on its own host closes its connection (the kernel
 * does), but one whose host died, was cut off or froze closes nothing, and Postgres would keep its idle connection
 * until TCP keepalive gave up (about two hours by default): every start meanwhile refused.
 */
export const OWNER_SILENCE_LIMIT_MS = 30_000;
const HEARTBEAT_MS = 5_000;
/**
 * A heartbeat unanswered this long counts as a lost connection. One that went silent without closing (a middlebox
 * dropped its state, a half-open connection) would otherwise keep the server thinking it owns the database until TCP
 * gave up on it, about 15 minutes, while Postgres ends the session, and the lock, after OWNER_SILENCE_LIMIT_MS.
 */
const HEARTBEAT_ANSWER_MS = 10_000;
/** How long opening the owner's connection may take, as for the pools' connections (storage/connect.ts). */
const CLAIM_CONNECT_MS = 5_000;
/** What a claim's statements are, in the error of one left unanswered. */
const CLAIM = 'a claim of database ownership';

/** The session holding the lock, known by pid and start: a pid alone may be another session's by now. */
interface OwnerSession {
  readonly pid: number;
  readonly startedAt: string;
}

export interface DatabaseOwnerLog {
  warn(details: Record<string, unknown>, message: string): void;
  error(details: Record<string, unknown>, message: string): void;
  info(details: Record<string, unknown>, message: string): void;
}

/**
 * One server per database in single-node mode. Its actors take epochs from an in-process table and its device
 * assertions' replay check is decided in memory, both sound only while no other server writes the same database. So
 * the server holds a session-level advisory lock on a connection of its own for its whole life, and a start refuses
 * while another holds it (a deploy that overlaps must stop the old server first; cluster mode lifts this). If that
 * connection is lost (Postgres restarted), the lock went with it: it is claimed again as soon as Postgres answers,
 * and an error is logged for as long as another server holds it instead. A server that stops talking (its host died,
 * it froze) loses the lock OWNER_SILENCE_LIMIT_MS later, so the next start is refused only that long; when it comes
 * back and finds another server holding the lock, `taken` is called (once): the server must stop, not serve beside it.
 */
export async function claimDatabase(connectionString: string, log: DatabaseOwnerLog, taken?: () => void): Promise<() => Promise<void>> {
  const first = await lockingClient(connectionString);
  if (first.kind !== 'held') {
    throw new Error('another server holds this database (single-node mode allows one); stop it first, or give this one its own database');
  }
  let client: pg.Client | undefined = first.client;
  /** The session of a connection lost from this side, which Postgres may not have ended yet (it holds the lock). */
  let lingering: OwnerSession | undefined;
  let released = false;
  let retry: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;

  const watch = (held: pg.Client, session: OwnerSession): void => {
    const lost = (err?: Error): void => {
      if (released || client !== held) return;
      client = undefined;
      lingering = session;
      clearInterval(heartbeat);
      held.end().catch(() => {});
      log.warn({ err }, 'the connection holding database ownership was lost; claiming it again');
      reclaim();
    };
    held.on('error', lost);
    held.on('end', () => lost());
    // A failed heartbeat ends the connection too ('error', 'end'), which is what claims the lock again; an unanswered
    // one is a loss as well (HEARTBEAT_ANSWER_MS). One at a time: a connection that stopped answering must not pile
    // them up.
    let beating = false;
    heartbeat = setInterval(() => {
      if (beating) return;
      beating = true;
      answeredWithin(held.query('SELECT 1'), HEARTBEAT_ANSWER_MS, 'a heartbeat of the connection holding database ownership').then(
        () => void (beating = false),
        (error: unknown) => {
          beating = false;
          if (error instanceof StoreSilentError) lost(error);
        },
      );
    }, HEARTBEAT_MS);
    heartbeat.unref();
  };

  const reclaim = (): void => {
    retry = setTimeout(() => {
      lockingClient(connectionString, lingering).then(
        (claim) => {
          if (released) return void (claim.kind === 'held' && claim.client.end().catch(() => {}));
          if (claim.kind === 'held') {
            client = claim.client;
            lingering = undefined;
            watch(claim.client, claim.session);
            log.info({}, 'database ownership claimed again');
            return;
          }
          if (claim.kind === 'own session ended') return reclaim();
          log.error({}, 'another server holds this database now; this one must stop (single-node mode allows one)');
          if (taken && !released) {
            released = true;
            taken();
            return;
          }
          reclaim();
        },
        () => reclaim(),
      );
    }, RECLAIM_EVERY_MS);
    retry.unref();
  };

  watch(first.client, first.session);
  return async () => {
    released = true;
    clearTimeout(retry);
    clearInterval(heartbeat);
    const held = client;
    client = undefined;
    await held?.end().catch(() => {});
  };
}

type Claim =
  | { readonly kind: 'held'; readonly client: pg.Client; readonly session: OwnerSession }
  /** `lingering`, this server's own earlier session, still held the lock: it was ended, and the lock is free soon. */
  | { readonly kind: 'own session ended' }
  | { readonly kind: 'taken' };

/** A connected client holding the lock, or who holds it instead. */
async function lockingClient(connectionString: string, lingering?: OwnerSession): Promise<Claim> {
  // Keepalive: a half-open connection (the database's host gone without a word) must end, so the lock is claimed again.
  // Bounded like the heartbeat: a claim that met a Postgres accepting connections and answering nothing (a balancer in
  // front of a dead primary, a black-holed route) waited, and with it every later claim, until TCP gave up (hours).
  const client = new pg.Client({ connectionString, application_name: 'registry-coordination/owner', keepAlive: true, connectionTimeoutMillis: CLAIM_CONNECT_MS });
  client.on('error', () => {});
  await client.connect();
  try {
    // PostgreSQL 14 and later; an older one keeps the lock of a silent owner until TCP keepalive ends its connection.
    await answeredWithin(client.query(`SET idle_session_timeout = ${OWNER_SILENCE_LIMIT_MS}`), HEARTBEAT_ANSWER_MS, CLAIM).catch((error: unknown) => {
      if (error instanceof StoreSilentError) throw error;
    });
    const { rows } = await answeredWithin(client.query<{ locked: boolean; pid: number; started_at: string }>(
      'SELECT pg_try_advisory_lock($1::int8) AS locked, pid, backend_start::text AS started_at FROM pg_stat_activity WHERE pid = pg_backend_pid()',
      [SINGLE_NODE_LOCK.toString()],
    ), HEARTBEAT_ANSWER_MS, CLAIM);
    const row = rows[0];
    if (row?.locked) return { kind: 'held', client, session: { pid: row.pid, startedAt: row.started_at } };
    // A session-level lock is held until its session ends: while this server's earlier session still exists, it is
    // the holder, not another server. Its connection is lost to this side, so it is ended here (same role).
    const own = lingering
      ? await answeredWithin(client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND backend_start::text = $2', [lingering.pid, lingering.startedAt]), HEARTBEAT_ANSWER_MS, CLAIM)
      : undefined;
    await client.end().catch(() => {});
    return own && own.rows.length > 0 ? { kind: 'own session ended' } : { kind: 'taken' };
  } catch (error) {
    // Not awaited: a connection that answers nothing may never finish saying goodbye either.
    client.end().catch(() => {});
    throw error;
  }
}

