import { sql, type Kysely } from 'kysely';

/**
 * Indexes the sweeps find their rows by (identity/access-sweep.ts, runtime/grant-sweep.ts), and the one an ended
 * Runtime session's browser index row is removed by. Each sweep removes what
 * has fallen due in statements of a few thousand rows until none is left; without an index every such statement
 * read the table from the start, past the rows the statements before it had just removed, so a backlog cost a
 * number of reads growing with its square. Revoked sessions are found by their own partial index: most never are.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX oauth_codes_by_expiry ON oauth_codes (expires_at)`.execute(db);
  await sql`CREATE INDEX browser_sessions_by_expiry ON browser_sessions (expires_at)`.execute(db);
  await sql`CREATE INDEX browser_sessions_revoked ON browser_sessions (revoked_at) WHERE revoked_at IS NOT NULL`.execute(db);
  await sql`CREATE INDEX environment_backend_grants_by_expiry ON environment_backend_grants (expires_at)`.execute(db);
  await sql`CREATE INDEX plugin_grants_by_expiry ON plugin_grants (expires_at)`.execute(db);
  // An ended Runtime session's browser index row goes by its session id (runtime/runtime-sessions.ts).
  await sql`CREATE INDEX runtime_session_browsers_by_session ON runtime_session_browsers (session_id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const index of ['runtime_session_browsers_by_session', 'plugin_grants_by_expiry', 'environment_backend_grants_by_expiry', 'browser_sessions_revoked', 'browser_sessions_by_expiry', 'oauth_codes_by_expiry']) {
    await sql`DROP INDEX ${sql.id(index)}`.execute(db);
  }
}
