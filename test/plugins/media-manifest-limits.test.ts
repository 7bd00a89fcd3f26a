import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PluginManifestSchema } from '../../plugins/plugin-manifest.schema.js';
import { productParts } from '../../server/main.js';
import { withTestServer, type TestServer } from '../support/server.js';

/**
 * The served manifest's `limits` against media-plugin.md "Limits". The spec's table bounds a space's
 * participants at 2 to 150 whatever its mode; no meeting-specific limit exists in the contract.
 */
let server: TestServer;

withTestServer(test, (started) => ({ server } = started), productParts);

test('the manifest publishes no meeting participant limit below the spec\'s "Space participants | 2 to 150"', async () => {
  const res = await fetch(`${server.url}/v1/catalog/plugins/plg_media/manifest`);
  const m = PluginManifestSchema.parse(await res.json());
  // The same manifest's installation schema accepts a 150-participant meeting.
  const policy = ((m.installationConfiguration.schema.properties as Record<string, any>).spaces.items.properties.policy.properties) as Record<string, { maximum?: number; enum?: string[] }>;
  assert.equal([policy.mode!.enum, policy.maxParticipants!.maximum], [['stage', 'meeting'], 150]);
  const belowSpec = Object.entries(m.limits).filter(([name, value]) => /Participants/.test(name) && name !== 'minSpaceParticipants' && value < 150 && !/^directCall/.test(name));
  assert.equal(belowSpec, [], 'a participant limit the spec does not state');
});

test.run();
