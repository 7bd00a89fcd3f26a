import { Writable } from 'node:stream';
import { pino, type Level, type Logger } from 'pino';

/** One captured log line, parsed: pino's fields (`level`, `msg`, …) and whatever the call site added. */
export type LogLine = Record<string, unknown> & { readonly level: number; readonly msg?: string };

/**
 * A real pino logger at `level` whose lines a test reads back: `raw` as written (to search for what must never be
 * logged), `lines` parsed (as `L`, the fields the test reads).
 */
export function captureLogs<L = LogLine>(level: Level): { logger: Logger; lines: L[]; raw: string[] } {
  const lines: L[] = [];
  const raw: string[] = [];
  const sink = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        raw.push(line);
        lines.push(JSON.parse(line) as L);
      }
      done();
    },
  });
  return { logger: pino({ level }, sink), lines, raw };
}
