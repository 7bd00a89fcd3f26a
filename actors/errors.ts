/**
 * Failures the actor host reports to whoever sent an event. `retryable` failures say nothing about the event itself:
 * the same event may be sent again (it was not applied). The others are final for that event.
 */
export abstract class ActorHostError extends Error {
  abstract readonly code: string;
  abstract readonly retryable: boolean;
}

/** Another activation with a newer ownership epoch wrote this actor; this activation has stopped. */
export class ActorFencedError extends ActorHostError {
  readonly code = 'actor_fenced';
  readonly retryable = true;
  constructor(readonly actor: string) {
    super(`actor ${actor} is owned by a newer activation`);
  }
}

/** The commit carrying this event failed; the actor was reloaded from its last committed snapshot. */
export class ActorCommitFailedError extends ActorHostError {
  readonly code = 'actor_commit_failed';
  readonly retryable = true;
  constructor(readonly actor: string, cause: unknown) {
    super(`commit of actor ${actor} failed`, { cause });
  }
}

/** The store could not be read while activating the actor. */
export class ActorStorageUnavailableError extends ActorHostError {
  readonly code = 'storage_unavailable';
  readonly retryable = true;
  constructor(readonly actor: string, cause: unknown) {
    super(`storage unavailable while activating ${actor}`, { cause });
  }
}

export class HostDrainingError extends ActorHostError {
  readonly code = 'host_draining';
  readonly retryable = true;
  constructor() {
    super('the actor host is shutting down');
  }
}

/** The actor has more unacknowledged events than its kind allows; the sender should back off. */
export class ActorOverloadedError extends ActorHostError {
  readonly code = 'actor_overloaded';
  readonly retryable = true;
  constructor(readonly actor: string, readonly limit: number) {
    super(`actor ${actor} has ${limit} events awaiting commit`);
  }
}

/** The machine threw while handling the event: the event is refused and the actor is unchanged. */
export class ActorEventRejectedError extends ActorHostError {
  readonly code = 'actor_event_rejected';
  readonly retryable = false;
  constructor(readonly actor: string, cause: unknown) {
    super(`actor ${actor} refused the event: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/**
 * The event holds text Postgres cannot keep (U+0000, an unpaired surrogate). Refused before it reaches the machine:
 * journalled, it would fail the group commit of every other actor in its batch.
 */
export class ActorEventUnstorableError extends ActorHostError {
  readonly code = 'actor_event_unstorable';
  readonly retryable = false;
  constructor(readonly actor: string, readonly pointer: string) {
    super(`actor ${actor} refused an event with unstorable text at ${JSON.stringify(pointer)}`);
  }
}

/** The stored snapshot no longer restores into the kind's machine. Needs an operator, not a retry. */
export class ActorRestoreError extends ActorHostError {
  readonly code = 'actor_restore_failed';
  readonly retryable = false;
  constructor(readonly actor: string, cause: unknown) {
    super(`snapshot of actor ${actor} does not restore`, { cause });
  }
}

export class UnknownActorKindError extends ActorHostError {
  readonly code = 'actor_kind_unknown';
  readonly retryable = false;
  constructor(readonly kind: string) {
    super(`no actor kind named ${kind}`);
  }
}

export class InvalidActorKeyError extends ActorHostError {
  readonly code = 'actor_key_invalid';
  readonly retryable = false;
  constructor(readonly kind: string, readonly key: string) {
    super(`"${key}" is not a valid key for actor kind ${kind}`);
  }
}
