import * as z from 'zod';
import { PLUGIN_ID } from '../../../plugins/plugin-catalog.js';
import { PluginManifestSchema, type PluginManifest } from '../../../plugins/plugin-manifest.schema.js';
import { HttpError } from '../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';

/** One protocol artifact as served: its exact text, media type and the digest the manifest pins. */
export interface ServedArtifact {
  readonly text: string;
  readonly mediaType: string;
  readonly sha256: string;
}

/** A Plugin whose contract the catalog publishes. */
export interface PublishedPlugin {
  readonly manifest: () => PluginManifest;
  /** Undefined for an id the manifest does not list. */
  readonly artifact: (artifactId: string) => ServedArtifact | undefined;
}

export const ARTIFACT_MEDIA_TYPES = ['application/vnd.aai.asyncapi+json', 'application/vnd.oai.openapi+json'] as const;

const PluginParams = z.strictObject({ pluginId: z.string().regex(PLUGIN_ID) });
const ArtifactParams = PluginParams.extend({ artifactId: z.string().regex(/^[a-z][a-z0-9-]{0,63}$/) });

const etag = (sha256: string): string => `"${sha256}"`;

/** Whether an `If-None-Match` list names this tag (weak comparison, as RFC 9110 asks for this header). */
function matches(ifNoneMatch: string | undefined, tag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch.trim() === '*' || ifNoneMatch.split(',').some((candidate) => candidate.trim().replace(/^W\//, '') === tag);
}

/**
 * Anonymous discovery of Plugin contracts (tag Catalog): the manifest, and each protocol artifact it pins, served as
 * the exact bytes whose SHA-256 the manifest states (which is also the artifact's ETag), so a client can check what it
 * fetched against the manifest it trusts.
 */
export function pluginCatalogRoutes(deps: { published: (pluginId: string) => PublishedPlugin | undefined }): AnyRoute[] {
  const common = { tags: ['Catalog'], credential: 'none', errorFormat: 'api', errors: [404] } as const;
  const plugin = (pluginId: string): PublishedPlugin => {
    const found = deps.published(pluginId);
    if (!found) throw new HttpError(404, 'plugin_not_found', `the catalog publishes no Plugin ${pluginId}`, { family: 'catalog' });
    return found;
  };
  return [
    defineRoute({
      ...common,
      operationId: 'getPluginManifest',
      method: 'get',
      path: '/v1/catalog/plugins/{pluginId}/manifest',
      summary: 'A Plugin\'s manifest: its contract as data',
      params: PluginParams,
      responses: { 200: { description: 'The manifest of the release the registry carries.', schema: PluginManifestSchema } },
      handler: async ({ params }) => ({ status: 200, body: plugin(params.pluginId).manifest() }),
    }),
    defineRoute({
      ...common,
      operationId: 'getPluginArtifact',
      method: 'get',
      path: '/v1/catalog/plugins/{pluginId}/artifacts/{artifactId}',
      summary: 'A protocol artifact a Plugin\'s manifest pins (AsyncAPI or OpenAPI document)',
      description:
        'The exact bytes whose SHA-256 the manifest lists under `protocolArtifacts[].sha256`, sent with the artifact\'s ' +
        'media type and that digest as a strong `ETag`; `If-None-Match` with it answers `304`.',
      params: ArtifactParams,
      requestHeaders: {
        'If-None-Match': { description: 'The ETag of a copy already held.', required: false, schema: z.string() },
      },
      responses: {
        200: {
          description: 'The artifact.',
          text: { mediaType: ARTIFACT_MEDIA_TYPES },
          headers: { ETag: { description: 'The quoted hex SHA-256 of the body.', schema: z.string() } },
        },
        304: { description: 'The copy named by `If-None-Match` is current.', headers: { ETag: { description: 'The quoted hex SHA-256 of the artifact.', schema: z.string() } } },
      },
      handler: async ({ params, headers }) => {
        const artifact = plugin(params.pluginId).artifact(params.artifactId);
        if (!artifact) throw new HttpError(404, 'artifact_not_found', `${params.pluginId} pins no artifact ${params.artifactId}`, { family: 'catalog' });
        const tag = etag(artifact.sha256);
        const validators: Record<string, string> = { etag: tag, 'cache-control': 'no-cache' };
        if (matches(headers['if-none-match'], tag)) return { status: 304, body: undefined, headers: validators };
        return { status: 200, body: artifact.text, headers: { ...validators, 'content-type': artifact.mediaType } };
      },
    }),
  ];
}
