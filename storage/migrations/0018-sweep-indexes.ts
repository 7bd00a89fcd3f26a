import { sql, type Kysely } from 'kysely';

/** Index name → definition: what the sweeps find due rows by, and what ended sessions' browser rows are removed by. */
const INDEXES: ReadonlyArray<readonly [string, string]> = [
  ['oauth_codes_by_expiry', 'oauth_codes (expires_at)'],
  ['browser_sessions_by_expiry', 'browser_sessions (expires_at)'],
  ['browser_sessions_revoked', 'browser_sessions (revoked_at) WHERE revoked_at IS NOT NULL'],
  ['oauth_grants_by_expiry', 'oauth_grants (expires_at)'],
  ['oauth_grants_revoked', 'oauth_grants (revoked_at) WHERE revoked_at IS NOT NULL'],
  ['environment_backend_grants_by_expiry', 'environment_backend_grants (expires_at)'],
  ['plugin_grants_by_expiry', 'plugin_grants (expires_at)'],
  ['runtime_session_browsers_by_session', 'runtime_session_browsers (session_id)'],
];

/**
 * Indexes the sweeps find their rows by (identity/access-sweep.ts, runtime/grant-sweep.ts), and the one an ended
 * Runtime session's browser index row is removed by (runtime/runtime-sessions.ts). Each sweep removes what has fallen
 * due in statements of a few thousand rows until none is left; without an index every such statement read its table
 * from the start, past the rows the statements before it had just removed, so a backlog cost reads growing with its
 * square. Revoked rows are found by partial indexes: most rows never are revoked.
 *
 * Built inside the migration's transaction, so writes to these tables wait while they build. On a database whose
 * tables are already large, an operator builds them first without blocking (`CREATE INDEX CONCURRENTLY <name> ON
 * <definition>`, names and definitions as below); the migration then finds them and builds nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  for (const [name, definition] of INDEXES) await sql.raw(`CREATE INDEX IF NOT EXISTS ${name} ON ${definition}`).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const [name] of [...INDEXES].reverse()) await sql`DROP INDEX ${sql.id(name)}`.execute(db);
}
