import pg from 'pg';

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
  let client = await lockingClient(connectionString);
  if (!client) {
    throw new Error('another server holds this database (single-node mode allows one); stop it first, or give this one its own database');
  }
  let released = false;
  let retry: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;

  const watch = (held: pg.Client): void => {
    const lost = (err?: Error): void => {
      if (released || client !== held) return;
      client = undefined;
      clearInterval(heartbeat);
      held.end().catch(() => {});
      log.warn({ err }, 'the connection holding database ownership was lost; claiming it again');
      reclaim();
    };
    held.on('error', lost);
    held.on('end', () => lost());
    // A failed heartbeat ends the connection too ('error', 'end'), which is what claims the lock again. One at a time:
    // a connection that stopped answering must not pile them up.
    let beating = false;
    heartbeat = setInterval(() => {
      if (beating) return;
      beating = true;
      held.query('SELECT 1').then(
        () => void (beating = false),
        () => void (beating = false),
      );
    }, HEARTBEAT_MS);
    heartbeat.unref();
  };

  const reclaim = (): void => {
    retry = setTimeout(() => {
      lockingClient(connectionString).then(
        (fresh) => {
          if (released) return void fresh?.end().catch(() => {});
          if (fresh) {
            client = fresh;
            watch(fresh);
            log.info({}, 'database ownership claimed again');
            return;
          }
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

  watch(client);
  return async () => {
    released = true;
    clearTimeout(retry);
    clearInterval(heartbeat);
    const held = client;
    client = undefined;
    await held?.end().catch(() => {});
  };
}

/** A connected client holding the lock, or undefined when another session holds it. */
async function lockingClient(connectionString: string): Promise<pg.Client | undefined> {
  // Keepalive: a half-open connection (the database's host gone without a word) must end, so the lock is claimed again.
  const client = new pg.Client({ connectionString, application_name: 'registry-coordination/owner', keepAlive: true });
  client.on('error', () => {});
  await client.connect();
  try {
    // PostgreSQL 14 and later; an older one keeps the lock of a silent owner until TCP keepalive ends its connection.
    await client.query(`SET idle_session_timeout = ${OWNER_SILENCE_LIMIT_MS}`).catch(() => {});
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::int8) AS locked', [SINGLE_NODE_LOCK.toString()]);
    if (rows[0]?.locked) return client;
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  await client.end().catch(() => {});
  return undefined;
}
