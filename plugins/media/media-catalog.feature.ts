import { publisherAuthorityOpenApiText } from '../../media/publisher-authority/publisher-authority.openapi.js';
import type { ServerParts } from '../../server/server.js';
import { pluginCatalogRoutes, type PublishedPlugin, type ServedArtifact } from '../../transport/http/routes/plugin-catalog.routes.js';
import type { PluginManifest } from '../plugin-manifest.schema.js';
import { buildMediaManifest, MEDIA_ARTIFACTS, sha256Hex, type MediaArtifactId, type MediaArtifactTexts } from './media.manifest.js';
import { mediaPlugin } from './media.plugin.js';

/** Builds one artifact's exact text for a registry at `publicUrl`. */
export type ArtifactTextProvider = (publicUrl: string) => string;

export interface MediaCatalogOptions {
  /**
   * The AsyncAPI 3.0.0 document of the Media control plane (artifact `media-v2-data-plane`), as the exact JSON text to
   * serve. The control plane's author passes its document builder here; the manifest pins whatever this returns.
   */
  readonly mediaV2DataPlaneAsyncApi: ArtifactTextProvider;
}

/**
 * The Media plugin in the public catalog: its manifest and protocol artifacts (GET /v1/catalog/plugins/plg_media/…).
 * The texts are built once, on the first request (the public address is known only once the server listens), and
 * the manifest's digests are taken from those same strings, so what is served is always what is pinned.
 */
export function mediaCatalogFeature(options: MediaCatalogOptions): ServerParts {
  return {
    build: ({ publicUrl }) => {
      let built: { manifest: PluginManifest; artifacts: ReadonlyMap<string, ServedArtifact> } | undefined;
      const publication = () => {
        if (!built) {
          const url = publicUrl();
          const texts: MediaArtifactTexts = {
            'media-v2-data-plane': options.mediaV2DataPlaneAsyncApi(url),
            'publisher-authority-api': publisherAuthorityOpenApiText(mediaPlugin.version),
          };
          const artifacts = new Map(
            (Object.keys(MEDIA_ARTIFACTS) as MediaArtifactId[]).map((id) => [id, Object.freeze({ text: texts[id], mediaType: MEDIA_ARTIFACTS[id].mediaType, sha256: sha256Hex(texts[id]) })]),
          );
          built = { manifest: buildMediaManifest({ publicUrl: url, artifacts: texts }), artifacts };
        }
        return built;
      };
      const media: PublishedPlugin = {
        manifest: () => publication().manifest,
        artifact: (artifactId) => publication().artifacts.get(artifactId),
      };
      return { routes: pluginCatalogRoutes({ published: (pluginId) => (pluginId === mediaPlugin.pluginId ? media : undefined) }) };
    },
  };
}
