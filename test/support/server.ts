import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../server/logger.js';
import { startServer, type RunningServer, type ServerParts } from '../../server/server.js';
import type { Logger } from 'pino';
import type { Test } from 'uvu';
import type { Clock } from '../../actors/clock.js';
import { createTestDatabase, type TestDatabase } from './database.js';

/** The real server, in this process, on free ports, against a test database. */
export async function startTestServer(
  databaseUrl: string,
  parts: ServerParts = {},
  env: Record<string, string> = {},
  clock?: Clock,
  /** The server's logger (e.g. captureLogs'), instead of one at TEST_LOG_LEVEL. */
  logger?: Logger,
): Promise<RunningServer & { url: string; opsUrl: string }> {
  const config = loadConfig({ DATABASE_URL: databaseUrl, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...env });
  const server = await startServer(config, parts, { logger: logger ?? createLogger(process.env.TEST_LOG_LEVEL === 'debug' ? 'debug' : process.env.TEST_LOG_LEVEL === 'warn' ? 'warn' : 'silent'), ...(clock ? { clock } : {}) });
  return { ...server, url: `http://127.0.0.1:${server.port}`, opsUrl: `http://127.0.0.1:${server.opsPort}` };
}

export type TestServer = Awaited<ReturnType<typeof startTestServer>>;

/**
 * Gives a suite a fresh database and the real server on it before its first test (`startTestServer`'s arguments after
 * the database), and stops and drops both after its last. Hooks the suite adds afterwards run after these. `restart`
 * stops the server and starts another one like it on the same database (handed to `opened` again): the one stopped
 * after the last test is always the one running.
 */
export function withTestServer(
  suite: Test,
  opened: (started: { db: TestDatabase; server: TestServer }) => void,
  ...args: StartArgs
): { restart(): Promise<void> } {
  let db: TestDatabase | undefined;
  let server: TestServer | undefined;
  const start = async (database: TestDatabase): Promise<void> => {
    server = await startTestServer(database.url, ...args);
    opened({ db: database, server });
  };
  suite.before(async () => {
    db = await createTestDatabase();
    await start(db);
  });
  suite.after(async () => {
    await server?.stop('test over');
    await db?.drop();
  });
  return {
    restart: async () => {
      if (!db) throw new Error('restart() before the suite started');
      await server?.stop('restart');
      await start(db);
    },
  };
}

type StartArgs = Parameters<typeof startTestServer> extends [string, ...infer Rest] ? Rest : never;
