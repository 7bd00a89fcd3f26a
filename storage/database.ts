import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

/** The kysely view of the schema that `storage/migrations` creates. One file, so a schema change has one home. */
export interface Database {
  actor_snapshots: ActorSnapshotTable;
  actor_journal: ActorJournalTable;
  idempotency_records: IdempotencyRecordTable;
  signing_keys: SigningKeyTable;
}

export interface SigningKeyTable {
  kid: string;
  alg: 'ES256';
  /** Written with `kid` and `kty` always (see RegistrySigningKeys). */
  public_jwk: ColumnType<Record<string, string> & { kid: string; kty: string }, string, string>;
  private_jwk: ColumnType<Record<string, string>, string, string>;
  created_at: Generated<Date>;
  retired_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

type Int8 = ColumnType<number, number, number>;
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type Json<T> = ColumnType<T, string, string>;

export interface ActorSnapshotTable {
  kind: string;
  key: string;
  /** Count of accepted events; the journal holds one row for each version from 1 up to it. */
  version: Int8;
  /** Ownership epoch of the activation that wrote the row; a write with an older epoch is refused. */
  epoch: Int8;
  snapshot: Json<unknown>;
  /** Durable timers of this actor (name → due time in ms), derived from machine context by the actor kind. */
  timers: Json<Record<string, number>>;
  /** Earliest due time among `timers`, indexed so the timer poller finds due actors without scanning. */
  next_due_at: ColumnType<Date | null, Date | string | null, Date | string | null>;
  updated_at: Timestamp;
}

export interface ActorJournalTable {
  kind: string;
  key: string;
  version: Int8;
  epoch: Int8;
  event: Json<unknown>;
  /** Host clock time at which the event was accepted. */
  at: Timestamp;
}

export interface IdempotencyRecordTable {
  scope: string;
  key: string;
  fingerprint: string;
  state: 'pending' | 'complete';
  status: ColumnType<number | null, number | null, number | null>;
  headers: ColumnType<Record<string, string> | null, string | null, string | null>;
  body: ColumnType<Buffer | null, Buffer | null, Buffer | null>;
  created_at: Generated<Date>;
  expires_at: Timestamp;
}

export type ActorSnapshotRow = Selectable<ActorSnapshotTable>;
export type ActorJournalRow = Selectable<ActorJournalTable>;
export type NewIdempotencyRecord = Insertable<IdempotencyRecordTable>;
