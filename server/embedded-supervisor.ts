import { LogThrottle } from '../actors/log-throttle.js';
import { startEmbeddedPostgres, type EmbeddedPostgresOptions, type RunningPostgres } from '../storage/embedded-postgres.js';
import type { Logger } from './logger.js';

/** Waits between attempts to start a Postgres that exited on its own: doubling from the first to the longest. */
const FIRST_WAIT_MS = 250;
const LONGEST_WAIT_MS = 5_000;

/**
 * The server's embedded Postgres, started again whenever it exits without being asked to (killed, crashed, ended by
 * the OOM killer). Nobody else runs it: without this, a server whose embedded Postgres died answered 503 until the
 * server itself was restarted. It comes back on the same directory and port, so the pools' connection strings still
 * hold and they reconnect on their own. A start can fail for a while (the killed postmaster's backends still hold its
 * shared memory until they notice), so it is tried again, with growing waits, until it succeeds or the server stops.
 */
export async function superviseEmbeddedPostgres(options: EmbeddedPostgresOptions, logger: Logger): Promise<RunningPostgres> {
  let current = await startEmbeddedPostgres(options);
  // Fixed from now on: the pools keep the URL they were given.
  const port = Number(new URL(current.connectionString).port);
  const quiet = new LogThrottle(logger);
  let stopping = false;
  let wake: (() => void) | undefined;
  let restarting: Promise<void> | undefined;

  const restart = async (): Promise<void> => {
    for (let wait = FIRST_WAIT_MS; !stopping; wait = Math.min(wait * 2, LONGEST_WAIT_MS)) {
      try {
        const fresh = await startEmbeddedPostgres({ ...options, port });
        if (stopping) return void (await fresh.stop());
        current = fresh;
        watch(fresh);
        logger.info({ port }, 'embedded Postgres started again');
        return;
      } catch (err) {
        quiet.say('warn', 'embedded restart', { err }, 'embedded Postgres did not start again yet; retrying');
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, wait).unref();
      });
    }
  };

  const watch = (running: RunningPostgres): void => {
    void running.exited.then(() => {
      if (stopping || running !== current) return;
      logger.error({ port }, 'embedded Postgres exited unexpectedly; starting it again');
      // Its exit listener goes; stop() of an exited postmaster settles at once.
      void running.stop();
      restarting = restart().finally(() => (restarting = undefined));
    });
  };
  watch(current);

  return {
    connectionString: current.connectionString,
    urlFor: (database) => current.urlFor(database),
    get exited() {
      return current.exited;
    },
    stop: async () => {
      stopping = true;
      wake?.();
      await restarting;
      await current.stop();
    },
  };
}
