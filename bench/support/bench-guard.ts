/**
 * Makes a bench clean up whatever ends it: a watchdog past `timeoutMs`, a signal, a crash. An embedded Postgres (and
 * any child server) would otherwise outlive the bench. Call `disarm()` once the bench has finished normally.
 */
export function guardBench(cleanup: () => Promise<void>, timeoutMs: number): { disarm(): void } {
  const abort = (reason: string, code: number): void => {
    process.stderr.write(`bench: ${reason}; cleaning up\n`);
    void cleanup().finally(() => process.exit(code));
  };
  const watchdog = setTimeout(() => abort(`exceeded ${timeoutMs / 1000} s`, 2), timeoutMs);
  process.once('SIGINT', () => abort('interrupted', 130));
  process.once('SIGTERM', () => abort('terminated', 143));
  process.once('uncaughtException', (error) => abort(`crashed: ${error.stack ?? error.message}`, 1));
  process.once('unhandledRejection', (reason) => abort(`unhandled rejection: ${String(reason)}`, 1));
  return { disarm: () => clearTimeout(watchdog) };
}
