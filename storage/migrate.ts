import { sql, type Kysely } from 'kysely';
import { connectStorage } from './connect.js';
import type { Database } from './database.js';
import { Migrator, type Migration, type MigrationProvider, type MigrationResultSet } from 'kysely/migration';
import * as core0001 from './migrations/0001-core.js';
import * as signingKeys0002 from './migrations/0002-signing-keys.js';
import * as access0003 from './migrations/0003-access.js';
import * as reviewHost0004 from './migrations/0004-review-host.js';
import * as runtime0005 from './migrations/0005-runtime.js';
import * as pluginSettings0006 from './migrations/0006-plugin-settings.js';
import * as pluginConfiguration0007 from './migrations/0007-plugin-configuration.js';
import * as pluginGrants0008 from './migrations/0008-plugin-grants.js';
import * as unusedCodesByBrowser0009 from './migrations/0009-unused-codes-by-browser.js';
import * as codesByBrowser0010 from './migrations/0010-codes-by-browser.js';
import * as journalSegments0011 from './migrations/0011-journal-segments.js';
import * as deviceAssertionUses0012 from './migrations/0012-device-assertion-uses.js';
import * as assertionUseBatches0013 from './migrations/0013-assertion-use-batches.js';
import * as environmentsByOrigin0014 from './migrations/0014-environments-by-origin.js';
import * as codeAuthTimeWhenAsked0015 from './migrations/0015-code-auth-time-when-asked.js';
import * as idempotencyClaimTokens0016 from './migrations/0016-idempotency-claim-tokens.js';
import * as journalRetention0017 from './migrations/0017-journal-retention.js';
import * as sweepIndexes0018 from './migrations/0018-sweep-indexes.js';
import * as endedActors0019 from './migrations/0019-ended-actors.js';
import * as codesBySession0020 from './migrations/0020-codes-by-session.js';
import * as endedActorsByKind0021 from './migrations/0021-ended-actors-by-kind.js';
import * as liveSessionsByAccount0022 from './migrations/0022-live-sessions-by-account.js';
import * as browserSessionsByBrowserAccount0023 from './migrations/0023-browser-sessions-by-browser-account.js';
import * as liveGrantsByAccount0024 from './migrations/0024-live-grants-by-account.js';
import * as liveGrantsByBrowser0025 from './migrations/0025-live-grants-by-browser.js';
import * as codesByBrowserExpiry0026 from './migrations/0026-codes-by-browser-expiry.js';
import * as refreshTokenSupersession0027 from './migrations/0027-refresh-token-supersession.js';
import * as actorStateVersions0028 from './migrations/0028-actor-state-versions.js';
import * as wakeSessionsWithoutLeaseCheck0029 from './migrations/0029-wake-sessions-without-lease-check.js';
import * as wakeEndedActorsWithoutEnd0030 from './migrations/0030-wake-ended-actors-without-end.js';

/**
 * Migrations are imported statically, not read from a folder at run time: the compiled server then carries exactly
 * the migrations it was built with, and their order is the order of this list.
 */
const migrations: Readonly<Record<string, Migration>> = Object.freeze({
  '0001-core': core0001,
  '0002-signing-keys': signingKeys0002,
  '0003-access': access0003,
  '0004-review-host': reviewHost0004,
  '0005-runtime': runtime0005,
  '0006-plugin-settings': pluginSettings0006,
  '0007-plugin-configuration': pluginConfiguration0007,
  '0008-plugin-grants': pluginGrants0008,
  '0009-unused-codes-by-browser': unusedCodesByBrowser0009,
  '0010-codes-by-browser': codesByBrowser0010,
  '0011-journal-segments': journalSegments0011,
  '0012-device-assertion-uses': deviceAssertionUses0012,
  '0013-assertion-use-batches': assertionUseBatches0013,
  '0014-environments-by-origin': environmentsByOrigin0014,
  '0015-code-auth-time-when-asked': codeAuthTimeWhenAsked0015,
  '0016-idempotency-claim-tokens': idempotencyClaimTokens0016,
  '0017-journal-retention': journalRetention0017,
  '0018-sweep-indexes': sweepIndexes0018,
  '0019-ended-actors': endedActors0019,
  '0020-codes-by-session': codesBySession0020,
  '0021-ended-actors-by-kind': endedActorsByKind0021,
  '0022-live-sessions-by-account': liveSessionsByAccount0022,
  '0023-browser-sessions-by-browser-account': browserSessionsByBrowserAccount0023,
  '0024-live-grants-by-account': liveGrantsByAccount0024,
  '0025-live-grants-by-browser': liveGrantsByBrowser0025,
  '0026-codes-by-browser-expiry': codesByBrowserExpiry0026,
  '0027-refresh-token-supersession': refreshTokenSupersession0027,
  '0028-actor-state-versions': actorStateVersions0028,
  '0029-wake-sessions-without-lease-check': wakeSessionsWithoutLeaseCheck0029,
  '0030-wake-ended-actors-without-end': wakeEndedActorsWithoutEnd0030,
});

const provider: MigrationProvider = { getMigrations: async () => ({ ...migrations }) };

/**
 * Migrates the database a server starts on, on a connection of its own with no statement timeout on either side.
 *
 * The request pool's limits are sized for requests; a migration that rewrites a whole table (0011 copies the journal,
 * which only grows) outlasts them on a large database, its transaction rolls back, and every later start fails the
 * same way. The limit is switched off explicitly because a database's or role's default statement_timeout would
 * otherwise apply to the connection.
 */
export async function migrateDatabase(connectionString: string, applicationName?: string): Promise<readonly string[]> {
  const connection = connectStorage({
    connectionString,
    maxConnections: 1,
    statementTimeoutMs: 0,
    ...(applicationName === undefined ? {} : { applicationName }),
  });
  try {
    return await connection.db.connection().execute(async (db) => {
      await sql`SET statement_timeout = 0`.execute(db);
      return migrateToLatest(db);
    });
  } finally {
    await connection.close();
  }
}

export async function migrateToLatest(db: Kysely<Database>): Promise<readonly string[]> {
  return applied(await migrator(db).migrateToLatest());
}

/** Migrates up or down to `name` (tests of a migration start from the schema before it). */
export async function migrateTo(db: Kysely<Database>, name: string): Promise<readonly string[]> {
  if (!(name in migrations)) throw new Error(`no migration named ${name}`);
  return applied(await migrator(db).migrateTo(name));
}

function migrator(db: Kysely<Database>): Migrator {
  // Migrations see the schema as unknown: they must keep working after `Database` has moved on.
  return new Migrator({ db: db as unknown as Kysely<unknown>, provider });
}

function applied({ error, results }: MigrationResultSet): readonly string[] {
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`migration ${failed} failed: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
