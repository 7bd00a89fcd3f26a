import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger } from 'pino';

/** JSON lines on stdout; request and actor context travel as child-logger bindings, not string interpolation. */
export function createLogger(level: LevelWithSilent, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'registry-coordination', ...bindings },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Secrets that could ride on a logged request never reach the log.
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie', '*.password'],
      censor: '[redacted]',
    },
    serializers: { err: pino.stdSerializers.err },
  });
}
