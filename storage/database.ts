import type { ColumnType, Generated, Insertable } from 'kysely';

/** The kysely view of the schema that `storage/migrations` creates. One file, so a schema change has one home. */
export interface Database {
  actor_snapshots: ActorSnapshotTable;
  actor_journal: ActorJournalTable;
  idempotency_records: IdempotencyRecordTable;
  signing_keys: SigningKeyTable;
  registry_secrets: RegistrySecretTable;
  environments: EnvironmentTable;
  oidc_clients: OidcClientTable;
  browser_sessions: BrowserSessionTable;
  oauth_grants: OAuthGrantTable;
  oauth_codes: OAuthCodeTable;
  oauth_refresh_tokens: OAuthRefreshTokenTable;
  oauth_consents: OAuthConsentTable;
  platform_admins: PlatformAdminTable;
  audit_events: AuditEventTable;
  reviewer_authorities: ReviewerAuthorityTable;
  review_host_capabilities: ReviewHostCapabilityTable;
  runtime_session_browsers: RuntimeSessionBrowserTable;
  environment_backends: EnvironmentBackendTable;
  environment_backend_grants: EnvironmentBackendGrantTable;
  plugin_installations: PluginInstallationTable;
  plugin_settings: PluginSettingTable;
  plugin_grants: PluginGrantTable;
  device_assertion_use_batches: DeviceAssertionUseBatchTable;
}

/** `deviceId:jti` of the device assertions one group commit accepted, kept until the last could pass the time check. */
export interface DeviceAssertionUseBatchTable {
  expires_at: Date;
  ids: string[];
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
  /** When the actor ended (its kind's `endedAt`), for retirement; null while it lives. */
  ended_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** The kind's state version the snapshot was written at (ActorKind.stateVersion); 1 for rows from before versions. */
  state_version: ColumnType<number, number | undefined, number>;
  updated_at: Timestamp;
}

/** One row per actor per commit: the consecutive versions `version`…`last_version`, one event each. */
export interface ActorJournalTable {
  kind: string;
  key: string;
  /** First version in the row; the primary key, so two writers building on the same version collide. */
  version: Int8;
  /**
   * Derivable from `events`, and stored anyway: the fence reads each committing actor's journal head, and an integer
   * costs that probe nothing where the newest row's events would have to be parsed.
   */
  last_version: Int8;
  epoch: Int8;
  /** `[acceptedAtMs, event]` for each version from `version` to `last_version`, in order (host clock time). */
  events: Json<ReadonlyArray<readonly [number, unknown]>>;
  /** The kind's state version every event of the segment was written at; 1 for segments from before versions. */
  state_version: ColumnType<number, number | undefined, never>;
}

export interface IdempotencyRecordTable {
  scope: string;
  key: string;
  fingerprint: string;
  state: 'pending' | 'complete';
  status: ColumnType<number | null, number | null, number | null>;
  headers: ColumnType<Record<string, string> | null, string | null, string | null>;
  body: ColumnType<Buffer | null, Buffer | null, Buffer | null>;
  /** The token of the request that holds a pending claim (NULL for claims made before tokens existed). */
  claim: NullableText;
  created_at: Generated<Date>;
  expires_at: Timestamp;
}

export type NewIdempotencyRecord = Insertable<IdempotencyRecordTable>;

type Instant = ColumnType<Date, Date, Date>;
type NullableInstant = ColumnType<Date | null, Date | null | undefined, Date | null>;
type NullableText = ColumnType<string | null, string | null | undefined, string | null>;

export interface RegistrySecretTable {
  name: string;
  secret: Buffer;
  created_at: Generated<Date>;
}

export interface EnvironmentTable {
  id: string;
  origin: string;
  owner_account_id: string;
  created_at: Generated<Date>;
}

export interface OidcClientTable {
  client_id: string;
  kind: 'environment' | 'cli';
  name: string;
  environment_id: NullableText;
  /** Exact redirect URIs for Environment clients; for the CLI client, its loopback URIs, of which a request may change only the port. */
  redirect_uris: Json<string[]>;
  created_at: Generated<Date>;
}

export interface BrowserSessionTable {
  id: string;
  kind: 'page' | 'console';
  /** SHA-256 of the cookie's secret: the database never holds a usable cookie. */
  secret_hash: string;
  /** The browser the session lives in, from its browser cookie: what browser SSO logout ends together. */
  browser_id: string;
  account_id: string;
  account_epoch: Int8;
  device_id: NullableText;
  /** For console sessions: the management grant they were exchanged from, which must stay live. */
  grant_id: NullableText;
  created_at: Instant;
  expires_at: Instant;
  revoked_at: NullableInstant;
  revoked_reason: NullableText;
}

export interface OAuthGrantTable {
  id: string;
  kind: 'environment' | 'cli' | 'desktop';
  client_id: NullableText;
  account_id: string;
  account_epoch: Int8;
  device_id: NullableText;
  browser_id: NullableText;
  environment_id: NullableText;
  scopes: Json<string[]>;
  created_at: Instant;
  last_used_at: Instant;
  expires_at: Instant;
  revoked_at: NullableInstant;
  revoked_reason: NullableText;
}

export interface OAuthCodeTable {
  code_hash: string;
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  scopes: Json<string[]>;
  nonce: NullableText;
  account_id: string;
  account_epoch: Int8;
  browser_id: string;
  /** The page session that authorized the code; its exchange refuses once that session is revoked (logout). */
  session_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The sign-in time, kept only when the request named `max_age` (the ID token's `auth_time`). */
  auth_time: NullableInstant;
  expires_at: Instant;
  used_at: NullableInstant;
  grant_id: NullableText;
}

export interface OAuthRefreshTokenTable {
  token_hash: string;
  grant_id: string;
  generation: number;
  created_at: Instant;
  used_at: NullableInstant;
  /** Set with `used_at` when a retry within the reuse grace replaced this token instead of a rotation spending it. */
  superseded_at: NullableInstant;
}

/** What a person agreed to on the consent page, per client: lets `prompt=none` answer without asking again. */
export interface OAuthConsentTable {
  account_id: string;
  client_id: string;
  scopes: Json<string[]>;
  granted_at: Instant;
}

export interface PlatformAdminTable {
  account_id: string;
  granted_by: string;
  reason: string;
  granted_at: Instant;
}

export interface AuditEventTable {
  id: Generated<number>;
  at: Instant;
  action: string;
  actor: string;
  target: string;
  reason: NullableText;
  data: Json<Record<string, unknown>>;
}

export interface ReviewerAuthorityTable {
  account_id: string;
  granted_by: string;
  reason: string;
  granted_at: Instant;
}

export interface ReviewHostCapabilityTable {
  id: string;
  /** SHA-256 of the capability secret. */
  secret_hash: string;
  account_id: string;
  /** The device it was issued to: every use also needs that device's assertion. */
  device_id: string;
  created_at: Instant;
  expires_at: Instant;
  revoked_at: NullableInstant;
}

export interface RuntimeSessionBrowserTable {
  browser_id: string;
  session_id: string;
  created_at: Instant;
}

/** The backend an Environment declares: the one exact endpoint its grants are for, and the scopes it may ask. */
export interface EnvironmentBackendTable {
  environment_id: string;
  endpoint: string;
  scopes: Json<string[]>;
  updated_at: Instant;
}

/** What every grant fenced by a Runtime lease stores (runtime/grant-fence.ts writes these columns). */
interface FencedGrantColumns {
  id: string;
  /** SHA-256 of the grant token. */
  token_hash: string;
  account_id: string;
  actor_id: string;
  environment_id: string;
  origin: string;
  /** The sign-in (OAuth grant) of the token that asked for it: its end ends the grant too. */
  oauth_grant_id: string;
  session_id: string;
  lease_id: string;
  lease_version: Int8;
  scopes: Json<string[]>;
  roles: Json<string[]>;
  created_at: Instant;
  expires_at: Instant;
  revoked_at: NullableInstant;
}

export interface EnvironmentBackendGrantTable extends FencedGrantColumns {
  endpoint: string;
  context: Json<Record<string, string | number | boolean>>;
  revoked_reason: string | null;
}

/** A Plugin installed in an Environment: it runs the release of the code-level catalog (`plugins/plugin-catalog.ts`). */
export interface PluginInstallationTable {
  environment_id: string;
  plugin_id: string;
  /** `operator:<name>`, as in the audit trail. */
  installed_by: string;
  installed_at: Instant;
  /** As written; it may no longer satisfy the installed release's schema, so readers validate it. NULL: unconfigured. */
  configuration: ColumnType<unknown, string | null | undefined, string | null>;
  configured_by: ColumnType<string | null, string | null | undefined, string | null>;
  configured_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/** One persisted settings leaf of one layer (see migration 0006 for who owns which layer). */
export interface PluginSettingTable {
  plugin_id: string;
  layer: 'environment' | 'user' | 'user_environment';
  /** '' for the `user` layer. */
  environment_id: string;
  /** '' for the `environment` layer. */
  account_id: string;
  setting: string;
  /** As written; it may no longer satisfy the installed schema, so readers validate it. */
  value: Json<unknown>;
  updated_at: Instant;
}

/** A Plugin Grant (migration 0008): the fence it was issued under is checked again on every use. */
export interface PluginGrantTable extends FencedGrantColumns {
  plugin_id: string;
  component: string;
  context: Json<Record<string, string>>;
}
