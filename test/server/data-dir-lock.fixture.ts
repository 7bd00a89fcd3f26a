import { existsSync } from 'node:fs';
import { lockDataDir } from '../../server/data-dir-lock.js';

/**
 * Takes the data-directory lock of argv[2] as soon as the file argv[3] exists (all contenders start together), says
 * whether it got it, and holds it until killed.
 */
const [dataDir, go] = [process.argv[2]!, process.argv[3]!];
process.stdout.write('waiting\n');
while (!existsSync(go)) await new Promise((r) => setImmediate(r));
try {
  await lockDataDir(dataDir);
  process.stdout.write('locked\n');
} catch (error) {
  process.stdout.write(`refused ${error instanceof Error ? error.message : String(error)}\n`);
}
setInterval(() => {}, 1 << 30);
