import { sql, type Kysely } from 'kysely';
import type { Clock } from '../actors/clock.js';
import type { Database } from '../storage/database.js';
import { HttpError } from '../transport/http/errors.js';
import { writeAudit } from './audit.js';
import { base32, newId } from './ids.js';
import type { RegistrySecrets } from './opaque-tokens.js';

/** Advisory-lock class of Environment registrations by origin (the two-key form: no single-key lock shares it). */
const ORIGIN_LOCK = 0x0e4f_0001;

/** Name of the registry secret keying pairwise actor ids. */
export const PAIRWISE_SECRET = 'pairwise-subject';

/** The one public OIDC client of the registry's own command-line tool; it redirects to any loopback port. */
export const CLI_CLIENT_ID = 'registry-cli';

/**
 * The CLI client's registered redirect URIs, where its sign-in listens (`client/oidc-client.ts`). A request may name
 * any port of one of them and change nothing else (RFC 8252 7.3): another path would let anyone send a signed-in
 * browser, with an error or a code, to any path of any service listening on the machine.
 */
export const CLI_REDIRECT_URIS: readonly string[] = ['http://127.0.0.1/callback', 'http://[::1]/callback'];

export const ENVIRONMENT_ID = /^[a-z0-9][a-z0-9-]{2,62}$/;

export interface OidcClient {
  readonly clientId: string;
  readonly kind: 'environment' | 'cli';
  readonly name: string;
  readonly environmentId: string | null;
  readonly redirectUris: readonly string[];
}

export interface Environment {
  readonly id: string;
  readonly origin: string;
  readonly ownerAccountId: string;
}

export interface EnvironmentRegistration {
  readonly environmentId: string;
  readonly origin: string;
  readonly ownerAccountId: string;
  readonly clientName: string;
  readonly redirectUris: readonly string[];
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);
/** Refused origins remembered at once (a stranger's preflights cannot grow memory). */
const REFUSED_ORIGINS_KEPT = 10_000;
const WORLD_ORIGIN_PREFIX = 'platform-env://';
/** The desktop shell serves an Environment's world from this address; its documents send it as their `Origin`. */
export const worldOrigin = (environmentId: string): string => `${WORLD_ORIGIN_PREFIX}${environmentId}`;
/** Longer than any origin a registration accepts (a DNS name is at most 253 characters). */
const MAX_ORIGIN_LENGTH = 300;

/**
 * An Environment origin: https, or http on a loopback host for local development. The exact serialisation of the URL's
 * origin, so comparisons with a browser's `Origin` header are plain string equality.
 */
export function canonicalOrigin(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  const secure = url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
  return secure && url.origin === text ? url.origin : undefined;
}

/**
 * Whether a URI has a fragment component (RFC 6749 3.1.2 forbids one in a redirect URI). Not `url.hash !== ''`: WHATWG
 * URL reports an empty fragment (`…/cb#`) as `hash === ''` while the URI still has one. In a serialised URL a `#` can
 * only be the fragment's delimiter.
 */
export function hasFragment(url: URL): boolean {
  return url.href.includes('#');
}

/**
 * Whether a URL carries a user name or password. WHATWG URL leaves them out of `origin`, so a URI such as
 * `https://login.bank.example@env.example/cb` is "on" env.example's origin while it reads as another host's and is no
 * valid URL string (the URL Standard cannot write credentials in one). A redirect URI never has them.
 */
export function hasUserinfo(url: URL): boolean {
  return url.username !== '' || url.password !== '';
}

function refuse(message: string, pointer: string): never {
  throw new HttpError(400, 'validation_failed', message, { details: [{ pointer, in: 'body', code: 'invalid', message }] });
}

/**
 * Registered Environments and the OIDC clients that act for them, plus the built-in CLI client. Registration is an
 * operator's act and is audited; clients are immutable once registered, so lookups are cached for the process.
 */
export class EnvironmentDirectory {
  readonly #db: Kysely<Database>;
  readonly #clock: Clock;
  readonly #secrets: RegistrySecrets;
  readonly #clients = new Map<string, OidcClient>();
  readonly #environments = new Map<string, Environment>();
  readonly #origins = new Set<string>();
  /** Origin → until when it is refused without a lookup; insertion order is age, so the oldest goes first. */
  readonly #refusedOrigins = new Map<string, number>();

  constructor(db: Kysely<Database>, clock: Clock, secrets: RegistrySecrets) {
    this.#db = db;
    this.#clock = clock;
    this.#secrets = secrets;
  }

  async ensureCliClient(): Promise<void> {
    await this.#db
      .insertInto('oidc_clients')
      .values({ client_id: CLI_CLIENT_ID, kind: 'cli', name: 'Registry command-line tool', redirect_uris: JSON.stringify(CLI_REDIRECT_URIS) })
      // A database made before the CLI registered its URIs holds none (it took any loopback path then).
      .onConflict((oc) => oc.column('client_id').doUpdateSet({ redirect_uris: JSON.stringify(CLI_REDIRECT_URIS) }))
      .execute();
  }

  /** Registers an Environment and its public OIDC client; the owner account must already exist (checked by the caller). */
  async register(input: EnvironmentRegistration, actor: string): Promise<{ environment: Environment; client: OidcClient }> {
    if (!ENVIRONMENT_ID.test(input.environmentId)) refuse('environment id: 3 to 63 of a-z 0-9 -, starting with a letter or digit', '/environmentId');
    const origin = canonicalOrigin(input.origin);
    if (!origin) refuse('origin must be an https origin (or http on a loopback host) with no path, e.g. https://env.example', '/origin');
    if (input.redirectUris.length === 0) refuse('at least one redirect URI is required', '/redirectUris');
    input.redirectUris.forEach((uri, i) => {
      let url: URL | undefined;
      try {
        url = new URL(uri);
      } catch {
        url = undefined;
      }
      if (!url || url.origin !== origin || hasFragment(url) || hasUserinfo(url) || url.href !== uri) {
        refuse(`redirect URI ${i + 1} must be an absolute URL on the Environment's origin ${origin}, without user name, password or fragment`, `/redirectUris/${i}`);
      }
    });
    const clientId = newId('envc');
    const at = new Date(this.#clock.now());
    try {
      await this.#db.transaction().execute(async (trx) => {
        // One Environment per origin: CORS, Runtime sessions and redirects are bound to the origin, and two Environments
        // there would give that origin's pages two pairwise actor ids of every person, linked by construction. The
        // lock makes two registrations of one origin take turns (the index on origin is not unique: older data).
        await sql`SELECT pg_advisory_xact_lock(${ORIGIN_LOCK}::int4, hashtext(${origin}))`.execute(trx);
        const taken = await trx.selectFrom('environments').select('id').where('origin', '=', origin).executeTakeFirst();
        if (taken && taken.id === input.environmentId) {
          throw new HttpError(409, 'environment_exists', `an Environment with id ${input.environmentId} is already registered`);
        }
        if (taken) {
          throw new HttpError(409, 'environment_origin_taken', `the Environment ${taken.id} is already registered at ${origin}`, { details: [{ pointer: '/origin', in: 'body', code: 'taken', message: 'one Environment per origin' }] });
        }
        await trx.insertInto('environments').values({ id: input.environmentId, origin, owner_account_id: input.ownerAccountId }).execute();
        await trx
          .insertInto('oidc_clients')
          .values({ client_id: clientId, kind: 'environment', name: input.clientName, environment_id: input.environmentId, redirect_uris: JSON.stringify(input.redirectUris) })
          .execute();
        await writeAudit(
          trx,
          {
            action: 'environment.register',
            actor,
            target: `environment:${input.environmentId}`,
            data: { origin, ownerAccountId: input.ownerAccountId, clientId, redirectUris: input.redirectUris },
          },
          at,
        );
      });
    } catch (error) {
      if ((error as { code?: string }).code === '23505') {
        throw new HttpError(409, 'environment_exists', `an Environment with id ${input.environmentId} is already registered`);
      }
      throw error;
    }
    this.#refusedOrigins.delete(origin);
    this.#refusedOrigins.delete(worldOrigin(input.environmentId));
    return {
      environment: { id: input.environmentId, origin, ownerAccountId: input.ownerAccountId },
      client: { clientId, kind: 'environment', name: input.clientName, environmentId: input.environmentId, redirectUris: input.redirectUris },
    };
  }

  async environment(id: string): Promise<Environment | undefined> {
    const cached = this.#environments.get(id);
    if (cached || !ENVIRONMENT_ID.test(id)) return cached;
    const row = await this.#db.selectFrom('environments').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) return undefined;
    const environment = { id: row.id, origin: row.origin, ownerAccountId: row.owner_account_id };
    this.#environments.set(id, environment);
    return environment;
  }

  /**
   * Whether pages of this origin belong to a registered Environment: its registered origin, or its desktop-shell
   * world `platform-env://{id}`. Answers are remembered (an Environment's origin never changes; a refusal for a minute,
   * so a stream of preflights from strangers costs one lookup per origin and minute, in a bounded table).
   */
  async isEnvironmentOrigin(origin: string): Promise<boolean> {
    if (this.#origins.has(origin)) return true;
    // Only what could be registered is looked up or remembered: anything else costs neither a query nor memory.
    if (origin.length > MAX_ORIGIN_LENGTH) return false;
    const worldId = origin.startsWith(WORLD_ORIGIN_PREFIX) ? origin.slice(WORLD_ORIGIN_PREFIX.length) : undefined;
    if (worldId === undefined ? canonicalOrigin(origin) !== origin : !ENVIRONMENT_ID.test(worldId)) return false;
    const refusedUntil = this.#refusedOrigins.get(origin);
    if (refusedUntil !== undefined && refusedUntil > this.#clock.now()) return false;
    const known = worldId !== undefined
      ? (await this.environment(worldId)) !== undefined
      : (await this.#db.selectFrom('environments').select('id').where('origin', '=', origin).limit(1).executeTakeFirst()) !== undefined;
    if (known) {
      this.#origins.add(origin);
    } else {
      if (this.#refusedOrigins.size >= REFUSED_ORIGINS_KEPT) this.#refusedOrigins.delete(this.#refusedOrigins.keys().next().value!);
      this.#refusedOrigins.set(origin, this.#clock.now() + 60_000);
    }
    return known;
  }

  async list(): Promise<Environment[]> {
    const rows = await this.#db.selectFrom('environments').selectAll().orderBy('id').execute();
    return rows.map((row) => ({ id: row.id, origin: row.origin, ownerAccountId: row.owner_account_id }));
  }

  async client(clientId: string): Promise<OidcClient | undefined> {
    const cached = this.#clients.get(clientId);
    if (cached || clientId.length > 64) return cached;
    const row = await this.#db.selectFrom('oidc_clients').selectAll().where('client_id', '=', clientId).executeTakeFirst();
    if (!row) return undefined;
    const client: OidcClient = { clientId: row.client_id, kind: row.kind, name: row.name, environmentId: row.environment_id, redirectUris: row.redirect_uris };
    this.#clients.set(clientId, client);
    return client;
  }

  /**
   * Who an account is inside one Environment: stable for the (account, Environment) pair, and unlinkable across
   * Environments without the registry's key. It is also the `sub` of ID tokens issued to that Environment's client.
   */
  pairwiseActorId(accountId: string, environmentId: string): string {
    const mac = this.#secrets.mac(PAIRWISE_SECRET, `${environmentId}\n${accountId}`);
    return `act_${base32(Buffer.from(mac, 'base64url'), 26)}`;
  }
}
