import { startEmbeddedPostgres } from '../../storage/embedded-postgres.js';

/** Starts the embedded Postgres on the directory given as argument and stays up (killed by the test). */
const postgres = await startEmbeddedPostgres({ directory: process.argv[2]! });
process.stdout.write(`ready ${postgres.connectionString}\n`);
setInterval(() => {}, 1 << 30);
