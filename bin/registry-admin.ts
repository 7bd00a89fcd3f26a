#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';

/**
 * The operators' command line. It talks to a running registry's operator listener (loopback by default, or
 * guarded by OPS_TOKEN), so every change goes through the same services, checks and audit records as the API, and
 * the server stays the only writer of its actors.
 */
const USAGE = `registry-admin <command> [options]

Commands:
  environment register --id <id> --origin <https://…> --owner <handle> --redirect-uri <uri> [--redirect-uri <uri> …] [--name <client name>]
      Register an Environment and its public OIDC client (prints the client id).
  environment list
  environment backend --id <id> --endpoint <https://…> --scope <scope> [--scope <scope> …]
      Declare the Environment's backend: the one endpoint its Backend Grants are for, and the scopes they may carry.
  plugin install --environment <id> --plugin <pluginId>
      Install a Plugin the registry carries (e.g. plg_media) in an Environment (audited as plugin.install).
  plugin list --environment <id>
  plugin configure <environmentId> <pluginId> <file.json>
      Set an installed Plugin's configuration (for plg_media: spaces and direct calls) from a JSON file; the registry
      checks it against the Plugin's configuration schema (audited as plugin.configure).
  plugin configuration <environmentId> <pluginId>
      Show an installed Plugin's configuration, checked against the installed release.
  admin grant --handle <handle> --reason <text>
      Grant platform admin to an existing account (audited as platform.admin.grant).
  accounts list
  devices list --handle <handle>
  audit list [--target <target>] [--limit <n>]
  signing-keys list
  signing-keys rotate --reason <text> [--withdraw]
      Sign with a new key from now on; the old one stays published until what it signed has expired. --withdraw
      unpublishes every older key at once (a leaked key): what they signed stops verifying (audited as signing_key.rotate).

Options:
  --ops-url <url>   operator listener (default: $OPS_URL or http://127.0.0.1:9090)
  --as <name>       who you are, for the audit trail (default: your login name)
Environment: OPS_TOKEN is sent as the bearer when set.`;

class UsageError extends Error {}

interface ErrorDetail {
  readonly pointer: string;
  readonly message: string;
}

/** An ApiError (`error`) or a Problem (`code`, `detail`, `errors`); a success body is neither. */
interface ErrorBody {
  readonly error?: { readonly code?: string; readonly message?: string; readonly details?: readonly ErrorDetail[] };
  readonly code?: string;
  readonly detail?: string;
  readonly errors?: readonly ErrorDetail[];
}

async function main(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      'ops-url': { type: 'string' },
      as: { type: 'string' },
      id: { type: 'string' },
      origin: { type: 'string' },
      owner: { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      name: { type: 'string' },
      endpoint: { type: 'string' },
      scope: { type: 'string', multiple: true },
      handle: { type: 'string' },
      environment: { type: 'string' },
      plugin: { type: 'string' },
      reason: { type: 'string' },
      target: { type: 'string' },
      limit: { type: 'string' },
      withdraw: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help || positionals.length === 0) {
    console.log(USAGE);
    return 0;
  }
  const base = (values['ops-url'] ?? process.env.OPS_URL ?? 'http://127.0.0.1:9090').replace(/\/$/, '');
  const operator = values.as ?? userInfo().username;
  const need = (name: keyof typeof values): string => {
    const value = values[name];
    if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
    return value;
  };
  const call = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    let response: Response;
    try {
      response = await fetch(base + path, {
        method,
        headers: {
          'x-operator-name': operator,
          ...(process.env.OPS_TOKEN ? { authorization: `Bearer ${process.env.OPS_TOKEN}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      // fetch says only "fetch failed"; why (refused, unknown host, reset) is in its cause.
      const cause = (error as { cause?: unknown }).cause;
      const why = cause instanceof Error ? cause.message : (error as Error).message;
      throw new Error(`cannot reach the operator listener at ${base}: ${why}`);
    }
    const text = await response.text();
    let payload: ErrorBody;
    try {
      payload = JSON.parse(text) as ErrorBody;
    } catch {
      // Not the operator listener (a proxy's error page, another service on the port): say what came back.
      const type = response.headers.get('content-type') ?? 'no content type';
      throw new Error(`${base} answered ${response.status} with ${type}, not the operator listener's JSON: ${text.slice(0, 200)}`);
    }
    if (!response.ok) {
      // The spec's two error bodies: runtime, account-policy, fencing and coordination failures (a storage outage, a
      // draining node) are flat Problems, the rest nested ApiErrors. Reading only the nested one printed
      // "503: request failed" for the failures an operator most needs explained.
      const refusal = payload.error ?? { code: payload.code, message: payload.detail, details: payload.errors };
      const details = refusal.details?.map((d) => `\n  ${d.pointer}: ${d.message}`).join('') ?? '';
      throw new Error(`${refusal.code ?? response.status}: ${refusal.message ?? 'request failed'}${details}`);
    }
    return payload;
  };
  const [noun, verb, ...args] = positionals;
  const command = [noun, verb].filter((word) => word !== undefined).join(' ');
  const operands = (names: readonly string[]): string[] => {
    if (args.length !== names.length) throw new UsageError(`${command} takes ${names.length === 0 ? 'no operands' : names.map((n) => `<${n}>`).join(' ')}`);
    return args;
  };
  const installation = (environmentId: string, pluginId: string): string => `/registry/environments/${encodeURIComponent(environmentId)}/plugins/${encodeURIComponent(pluginId)}`;
  if (!['plugin configure', 'plugin configuration'].includes(command)) operands([]);
  let result: unknown;
  switch (command) {
    case 'environment register':
      result = await call('POST', '/registry/environments', {
        environmentId: need('id'),
        origin: need('origin'),
        ownerHandle: need('owner'),
        redirectUris: values['redirect-uri'] ?? [],
        ...(values.name ? { clientName: values.name } : {}),
      });
      break;
    case 'environment list':
      result = await call('GET', '/registry/environments');
      break;
    case 'environment backend':
      result = await call('PUT', `/registry/environments/${encodeURIComponent(need('id'))}/backend`, { endpoint: need('endpoint'), scopes: values.scope ?? [] });
      break;
    case 'plugin install':
      result = await call('PUT', installation(need('environment'), need('plugin')));
      break;
    case 'plugin configure': {
      const [environmentId, pluginId, file] = operands(['environmentId', 'pluginId', 'file.json']) as [string, string, string];
      const text = await readFile(file, 'utf8');
      let document: unknown;
      try {
        document = JSON.parse(text);
      } catch (error) {
        throw new Error(`${file} is not JSON: ${(error as Error).message}`);
      }
      result = await call('PUT', `${installation(environmentId, pluginId)}/configuration`, document);
      break;
    }
    case 'plugin configuration': {
      const [environmentId, pluginId] = operands(['environmentId', 'pluginId']) as [string, string];
      result = await call('GET', `${installation(environmentId, pluginId)}/configuration`);
      break;
    }
    case 'plugin list':
      result = await call('GET', `/registry/environments/${encodeURIComponent(need('environment'))}/plugins`);
      break;
    case 'admin grant':
      result = await call('PUT', `/registry/accounts/${encodeURIComponent(need('handle'))}/platform-admin`, { reason: need('reason') });
      break;
    case 'accounts list': {
      // The listener answers a page at a time; an operator asking for the list gets all of it.
      const accounts: unknown[] = [];
      let after: string | undefined;
      do {
        const page = (await call('GET', `/registry/accounts?limit=1000${after === undefined ? '' : `&after=${encodeURIComponent(after)}`}`)) as { accounts: unknown[]; next?: string };
        accounts.push(...page.accounts);
        after = page.next;
      } while (after !== undefined);
      result = { accounts };
      break;
    }
    case 'devices list':
      result = await call('GET', `/registry/accounts/${encodeURIComponent(need('handle'))}/devices`);
      break;
    case 'audit list': {
      const query = new URLSearchParams({ ...(values.target ? { target: values.target } : {}), ...(values.limit ? { limit: values.limit } : {}) });
      result = await call('GET', `/registry/audit${query.size > 0 ? `?${query}` : ''}`);
      break;
    }
    case 'signing-keys list':
      result = await call('GET', '/registry/signing-keys');
      break;
    case 'signing-keys rotate':
      result = await call('POST', '/registry/signing-keys/rotate', { reason: need('reason'), withdraw: values.withdraw === true });
      break;
    default:
      throw new UsageError(`unknown command: ${command}`);
  }
  console.log(JSON.stringify(result, null, 2));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`${(error as Error).message}\n\n${USAGE}`);
      process.exit(2);
    }
    console.error(`registry-admin: ${(error as Error).message}`);
    process.exit(1);
  },
);
