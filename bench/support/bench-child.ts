import { fork, type ChildProcess } from 'node:child_process';

/**
 * A bench helper process (a server under test, an echo server, a socket holder) driven over the IPC channel: typed
 * requests and replies, so the load generator never shares an event loop with what it measures.
 *
 * A protocol maps each request type to its payload and result. The child calls `serveParent` with one handler per
 * type; the parent calls `BenchChild.start` and `request`. The child exits when the parent goes away.
 */
export type ChildProtocol = Record<string, { readonly request: unknown; readonly result: unknown }>;

type Envelope = { readonly id: number; readonly type: string; readonly payload: unknown };
type Reply = { readonly id: number; readonly ok: true; readonly result: unknown } | { readonly id: number; readonly ok: false; readonly error: string };
/** Sent once, unprompted, when the child is ready for requests. */
type Ready = { readonly ready: true; readonly info: unknown };

export type Handlers<P extends ChildProtocol> = { readonly [K in keyof P]: (payload: P[K]['request']) => Promise<P[K]['result']> };

export class BenchChild<P extends ChildProtocol, TInfo> {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  readonly #exited: Promise<void>;
  readonly info: TInfo;
  #next = 1;

  private constructor(child: ChildProcess, info: TInfo, exited: Promise<void>) {
    this.#child = child;
    this.info = info;
    this.#exited = exited;
    child.on('message', (message: unknown) => {
      const reply = message as Reply;
      const waiting = this.#pending.get(reply.id);
      if (!waiting) return;
      this.#pending.delete(reply.id);
      if (reply.ok) waiting.resolve(reply.result);
      else waiting.reject(new Error(reply.error));
    });
    void exited.then(() => {
      for (const waiting of this.#pending.values()) waiting.reject(new Error(`bench child ${child.pid} exited`));
      this.#pending.clear();
    });
  }

  /** Forks `module` and resolves once it says it is ready, with what it said (ports and the like). */
  static start<P extends ChildProtocol, TInfo>(
    module: URL,
    options: { args?: readonly string[]; execArgv?: readonly string[]; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
  ): Promise<BenchChild<P, TInfo>> {
    const child = fork(module, [...(options.args ?? [])], {
      execArgv: [...(options.execArgv ?? [])],
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${module.pathname} was not ready within ${options.timeoutMs ?? 60_000} ms`));
      }, options.timeoutMs ?? 60_000);
      const onMessage = (message: unknown): void => {
        if (typeof message !== 'object' || message === null || !('ready' in message)) return;
        child.off('message', onMessage);
        clearTimeout(timer);
        resolve(new BenchChild<P, TInfo>(child, (message as Ready).info as TInfo, exited));
      };
      child.on('message', onMessage);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`${module.pathname} exited (${child.exitCode ?? child.signalCode}) before it was ready`));
      });
    });
  }

  get pid(): number {
    return this.#child.pid!;
  }

  request<K extends keyof P & string>(type: K, payload: P[K]['request']): Promise<P[K]['result']> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve: (value) => resolve(value as P[K]['result']), reject });
      this.#child.send({ id, type, payload } satisfies Envelope, (error) => {
        if (!error) return;
        this.#pending.delete(id);
        reject(error);
      });
    });
  }

  /** Asks the child to leave (closing the IPC channel), then kills it if it has not exited within `graceMs`. Idempotent. */
  async stop(graceMs = 20_000): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    if (this.#child.connected) this.#child.disconnect();
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }
}

/**
 * The child's side: answers the parent's requests with `handlers`, tells the parent it is ready with `info`, and runs
 * `onDisconnect` (then exits) when the parent closes the channel or dies.
 */
export function serveParent<P extends ChildProtocol>(handlers: Handlers<P>, info: unknown, onDisconnect: () => Promise<void> = async () => {}): void {
  const send = process.send?.bind(process);
  if (!send) throw new Error('this module runs as a bench child process (forked with an IPC channel)');
  process.on('message', (message: unknown) => {
    const { id, type, payload } = message as Envelope;
    const handler = (handlers as Record<string, ((payload: unknown) => Promise<unknown>) | undefined>)[type];
    const run = handler ? handler(payload) : Promise.reject(new Error(`unknown request ${type}`));
    run.then(
      (result) => send({ id, ok: true, result } satisfies Reply),
      (error: unknown) => send({ id, ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) } satisfies Reply),
    );
  });
  process.once('disconnect', () => {
    onDisconnect().finally(() => process.exit(0));
  });
  send({ ready: true, info } satisfies Ready);
}
