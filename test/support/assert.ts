import * as assert from 'uvu/assert';

/** Asserts that `run` rejects, with an error `accept` agrees to. */
export async function rejects(run: () => Promise<unknown>, accept: (error: unknown) => boolean, message?: string): Promise<void> {
  let outcome: { error: unknown } | undefined;
  try {
    await run();
  } catch (error) {
    outcome = { error };
  }
  if (!outcome) assert.unreachable(message ?? 'expected a rejection');
  else if (!accept(outcome.error)) {
    const e = outcome.error;
    assert.unreachable(`${message ?? 'unexpected rejection'}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
}
