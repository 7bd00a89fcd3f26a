import { loadConfig } from '../../server/config.js';
import { createLogger } from '../../server/logger.js';
import { startServer, type RunningServer, type ServerParts } from '../../server/server.js';
import type { Clock } from '../../actors/clock.js';

/** The real server, in this process, on free ports, against a test database. */
export async function startTestServer(
  databaseUrl: string,
  parts: ServerParts = {},
  env: Record<string, string> = {},
  clock?: Clock,
): Promise<RunningServer & { url: string; opsUrl: string }> {
  const config = loadConfig({ DATABASE_URL: databaseUrl, PORT: '0', OPS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...env });
  const server = await startServer(config, parts, { logger: createLogger(process.env.TEST_LOG_LEVEL === 'debug' ? 'debug' : process.env.TEST_LOG_LEVEL === 'warn' ? 'warn' : 'silent'), ...(clock ? { clock } : {}) });
  return { ...server, url: `http://127.0.0.1:${server.port}`, opsUrl: `http://127.0.0.1:${server.opsPort}` };
}
