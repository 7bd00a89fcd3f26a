import type { ActorKind } from '../actors/actor-kind.js';
import type { RetirementCutoffs } from '../storage/postgres/actor-retirement.js';
import type { KindCutoffs } from '../storage/postgres/journal-retention.js';

const DAY_MS = 24 * 3600_000;

/** The server's retention settings: ACTOR_JOURNAL_RETENTION_DAYS and ACTOR_ENDED_RETENTION_DAYS (0 keeps). */
export interface RetentionDays {
  readonly journalDays: number;
  readonly endedDays: number;
}

export interface RetentionCutoffs {
  /** Journal retention's cutoffs, or undefined when no segment is ever due (the server keeps all, no kind keeps less). */
  readonly journal: { readonly before: number; readonly kinds: KindCutoffs } | undefined;
  /** Retirement's cutoffs, or undefined when no ended actor is ever due. */
  readonly ended: RetirementCutoffs | undefined;
}

/**
 * What is due at `now`: the server's cutoffs, and later ones for the kinds that keep their history for less
 * (ActorKind.retention). A kind's own limit applies also when the server keeps everything (0 days): it stands for a
 * promise of the kind's contract, not for an operator's choice of how much history to keep.
 */
export function retentionCutoffs(kinds: readonly ActorKind[], days: RetentionDays, now: number): RetentionCutoffs {
  const journalBefore = days.journalDays > 0 ? now - days.journalDays * DAY_MS : undefined;
  const endedBefore = days.endedDays > 0 ? now - days.endedDays * DAY_MS : undefined;
  const journalKinds: Record<string, number> = {};
  const endedKinds: Array<{ kind: string; before: number }> = [];
  for (const kind of kinds) {
    const { journalMs, endedMs } = kind.retention ?? {};
    if (journalMs !== undefined && (journalBefore === undefined || now - journalMs > journalBefore)) journalKinds[kind.name] = now - journalMs;
    if (endedMs !== undefined && (endedBefore === undefined || now - endedMs > endedBefore)) endedKinds.push({ kind: kind.name, before: now - endedMs });
  }
  const hasJournalKinds = Object.keys(journalKinds).length > 0;
  return {
    // Nothing is older than the epoch: with the server keeping every segment, only the shorter kinds' go.
    journal: journalBefore === undefined && !hasJournalKinds ? undefined : { before: journalBefore ?? 0, kinds: journalKinds },
    ended: endedBefore === undefined && endedKinds.length === 0 ? undefined : { ...(endedBefore === undefined ? {} : { before: endedBefore }), kinds: endedKinds },
  };
}
