import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { identityFeature } from '../identity/identity.feature.js';
import { mediaControlAsyncApiText, mediaFeature } from '../media/media.feature.js';
import { mediaCatalogFeature } from '../plugins/media/media-catalog.feature.js';
import { pluginsFeature } from '../plugins/plugins.feature.js';
import { runtimeFeature } from '../runtime/runtime.feature.js';
import { combineParts, startServer, type RunningServer, type ServerParts } from './server.js';

/**
 * Starts the server with the given feature parts, and turns SIGTERM/SIGINT into a drain: stop accepting, finish
 * in-flight requests, flush commits, close storage, exit 0. A second signal exits at once.
 */
export async function runServer(parts: ServerParts): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`registry: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel, { node: config.nodeId });
  // The handlers are installed before the start, not once it is done: a signal's default action would otherwise end
  // the process mid-start (a deploy stopping a server that is still migrating), leaving its embedded Postgres running
  // with no server. A signal during the start lets the start finish and then drains as usual.
  let server: RunningServer | undefined;
  let stopWith: NodeJS.Signals | undefined;
  const stop = (signal: NodeJS.Signals, running: RunningServer): void => {
    running.stop(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        logger.fatal({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopWith !== undefined) {
      logger.warn({ signal }, 'second signal: exiting without draining');
      process.exit(1);
    }
    stopWith = signal;
    if (server) stop(signal, server);
    else logger.info({ signal }, 'signal during the start: stopping once started');
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    // Stopped because another server took the database over: exit 1, so a supervisor sees a failure.
    server = await startServer(config, parts, { logger, stoppedItself: () => process.exit(1) });
  } catch (error) {
    logger.fatal({ err: error }, 'server did not start');
    process.exit(1);
  }
  if (stopWith !== undefined) stop(stopWith, server);
}

/** Every feature of the product, in the order their routes appear in the API description. */
export const productParts: ServerParts = combineParts(
  identityFeature,
  runtimeFeature(),
  pluginsFeature,
  mediaFeature(),
  mediaCatalogFeature({ mediaV2DataPlaneAsyncApi: mediaControlAsyncApiText }),
);

if (import.meta.url === `file://${process.argv[1]}`) await runServer(productParts);
