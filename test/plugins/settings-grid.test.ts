import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as z from 'zod';
import { mediaPlugin } from '../../plugins/media/media.plugin.js';
import { leafProblem } from '../../plugins/settings/settings-schema.js';

/**
 * media-plugin.md, Settings 1.0.0: `volume` is a number 0 to 1, "multiple of 0.05". The registry decides it as the
 * schema published to Plugins does, so a value that schema refuses is never stored or delivered.
 */
const schema = mediaPlugin.settingsSchema;
const published = z.number().min(0).max(1).multipleOf(0.05);

test('values off the 0.05 grid are refused by the registry, as the published schema refuses them', () => {
  for (const off of [1e-11, 0.99999999999, 0.50000000001, 0.33]) {
    assert.is(published.safeParse(off).success, false, `zod multipleOf(0.05) refuses ${off}`);
    assert.is(leafProblem(schema, 'user', 'volume', off)?.code, 'setting_value_invalid', `registry accepts volume ${off}`);
  }
});

test('values on the 0.05 grid pass, however binary floating point writes them', () => {
  for (const on of [0, 0.05, 0.35, 0.7, 0.95, 1]) {
    assert.is(published.safeParse(on).success, true, `zod multipleOf(0.05) admits ${on}`);
    assert.is(leafProblem(schema, 'user', 'volume', on), undefined, `registry admits volume ${on}`);
  }
});

test.run();
