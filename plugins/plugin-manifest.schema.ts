import * as z from 'zod';
import { apiSchema } from '../transport/http/api-schemas.js';

/**
 * A Plugin's manifest as the catalog serves it: the whole contract as data (identity, resources, permissions, data,
 * configuration and settings schemas, versioning, limits and the protocol artifacts pinned by digest). Schemas inside
 * it are JSON Schema (draft 2020-12) documents, carried as they are.
 */
const JsonSchemaDocument = z.record(z.string(), z.unknown()).describe('A JSON Schema (draft 2020-12) document.');

const FrontendAdapter = z.object({
  id: z.string(),
  runtime: z.string().describe('The UI runtime the adapter is written for (`react`).'),
  exportPath: z.string().describe('The package export the adapter is imported from.'),
  peerDependencies: z.record(z.string(), z.string()).describe('Package name to semver range.'),
  semanticPorts: z.object({ provides: z.array(z.string()), requires: z.array(z.string()) }),
  exports: z.array(z.string()).describe('The names the adapter exports.'),
});

const BackendComponent = z.object({
  id: z.string(),
  name: z.string(),
  protocol: z.enum(['websocket', 'http']),
  protocolArtifactId: z.string().describe('The `protocolArtifacts[].id` describing this component\'s protocol.'),
  capabilities: z.array(z.string()),
  grantScopes: z.array(z.string()).describe('The plugin grant scopes a connection to this component may carry.'),
  context: JsonSchemaDocument.describe('JSON Schema of the object passed with a connection.'),
});

const HostCallback = z.object({
  id: z.string(),
  operationId: z.string(),
  protocolArtifactId: z.string(),
  target: z.literal('environment_backend'),
  address: z.string().describe('Where the address comes from, as a path in the installation configuration.'),
  credential: z.object({
    kind: z.literal('forwarded_plugin_grant'),
    bodyField: z.string(),
    requiredScope: z.string(),
  }),
  timeoutMs: z.int(),
  maxResponseBytes: z.int(),
  redirects: z.literal('error'),
  onFailure: z.literal('deny'),
});

const BrowserRequirement = z.object({
  permission: z.string().describe('A browser permission (Permissions Policy feature name).'),
  optional: z.boolean(),
  requestedWhen: z.string(),
});

const NetworkOrigin = z.object({
  template: z.string().describe('The placeholder the contract names, e.g. `{media_url}`.'),
  scheme: z.enum(['https', 'wss']).describe('The scheme the contract requires.'),
  origin: z.string().describe('The placeholder resolved to this registry\'s public address.'),
  purpose: z.string(),
});

const ProtocolArtifact = z.object({
  id: z.string(),
  kind: z.enum(['asyncapi', 'openapi']),
  specificationVersion: z.string(),
  mediaType: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/).describe('Hex SHA-256 of the exact bytes served at `url`; also their ETag.'),
  url: z.string(),
});

export const PluginManifestSchema = apiSchema(
  'PluginManifest',
  z.object({
    pluginId: z.string(),
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    version: z.string(),
    contractVersion: z.string(),
    category: z.string(),
    kind: z.string().describe('`full_stack`: a frontend adapter and a backend component.'),
    runtimeClass: z.string().describe('`trusted_library`: runs in the Environment\'s page as a library it trusts.'),
    publisher: z.object({ id: z.string(), handle: z.string() }),
    capabilities: z.array(z.string()),
    frontendAdapters: z.array(FrontendAdapter),
    backendComponents: z.array(BackendComponent),
    hostCallbacks: z.array(HostCallback),
    platformPermissions: z.array(z.string()),
    browserRequirements: z.array(BrowserRequirement),
    network: z.object({ origins: z.array(NetworkOrigin) }),
    data: z.object({
      collected: z.array(z.string()),
      sharedWithOthers: z.array(z.string()),
      mediaRecorded: z.boolean(),
      mediaTranscribed: z.boolean(),
      movementOrPositionCollected: z.boolean(),
    }),
    installationConfiguration: z.object({ schema: JsonSchemaDocument }),
    settings: z.object({
      schemaVersion: z.string(),
      schema: JsonSchemaDocument,
      scopes: z.record(z.string(), z.array(z.string())).describe('Setting name to the scopes at which it may be set.'),
    }),
    limits: z.record(z.string(), z.int()),
    versioning: z.object({
      pluginVersion: z.string(),
      contractVersion: z.string(),
      compatibleContracts: z.string(),
      compatibleSdk: z.string(),
      settingsSchemaVersion: z.string(),
      controlProtocol: z.string(),
      publisherAuthority: z.string(),
      license: z.string(),
    }),
    protocolArtifacts: z.array(ProtocolArtifact),
  }),
  'A Plugin\'s contract as data, as the catalog publishes it.',
);

export type PluginManifest = z.output<typeof PluginManifestSchema>;
export type PluginProtocolArtifact = z.output<typeof ProtocolArtifact>;
