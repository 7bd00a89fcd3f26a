import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { identityFeature } from '../identity/identity.feature.js';
import { mediaControlAsyncApiText, mediaFeature } from '../media/media.feature.js';
import { mediaCatalogFeature } from '../plugins/media/media-catalog.feature.js';
import { pluginsFeature } from '../plugins/plugins.feature.js';
import { runtimeFeature } from '../runtime/runtime.feature.js';
import { combineParts, startServer, type ServerParts } from './server.js';

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
  let server;
  try {
    server = await startServer(config, parts, { logger });
  } catch (error) {
    logger.fatal({ err: error }, 'server did not start');
    process.exit(1);
  }
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      logger.warn({ signal }, 'second signal: exiting without draining');
      process.exit(1);
    }
    signalled = true;
    server.stop(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        logger.fatal({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
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
