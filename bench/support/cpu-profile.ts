import { writeFile } from 'node:fs/promises';
import type { Profiler, Runtime } from 'node:inspector';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { percent } from './report-format.js';

export interface ProfileShare {
  readonly name: string;
  /** Share of the busy (non-idle) samples. */
  readonly share: number;
}

export interface ProfileSummary {
  /** Busy share of the profiled window (samples that were not `(idle)`). */
  readonly busy: number;
  /** Self time by where the code lives: a project folder, a package, Node's internals, GC, native. */
  readonly byArea: readonly ProfileShare[];
  /** The functions with the most self time. */
  readonly topFunctions: readonly ProfileShare[];
  /** The project's own functions (not packages, not Node) with the most time spent in them and what they call. */
  readonly topProjectInclusive: readonly ProfileShare[];
}

/** Where a frame's code lives, from its script URL: `runtime/`, `pkg zod`, `node internals`, `gc`, `native`. */
function areaOf(frame: Runtime.CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return 'gc';
    if (functionName === '(idle)') return 'idle';
    if (functionName === '(program)') return 'native (program)';
    return 'native (V8 builtins, uWS)';
  }
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg) return `pkg ${pkg[1]}`;
  if (url.startsWith('node:')) return 'node internals';
  const own = /\/dist\/([^/]+)\//.exec(url);
  if (own) return `${own[1]}/`;
  return url;
}

function frameName(frame: Runtime.CallFrame): string {
  const file = frame.url.replace(/^.*\/node_modules\//, '').replace(/^.*\/dist\//, '').replace(/^file:\/\//, '');
  return `${frame.functionName || '(anonymous)'} ${file ? `${file}:${frame.lineNumber + 1}` : ''}`.trim();
}

const isProject = (frame: Runtime.CallFrame): boolean => /\/dist\//.test(frame.url) && !/\/node_modules\//.test(frame.url) && !/\/dist\/bench\//.test(frame.url);

/**
 * Self time per area and per function, and inclusive time of the project's own functions, from a V8 CPU profile
 * (`Profiler.stop`). Samples taken inside the bench's own profiler calls (frames of bench/) are left out: they are
 * the measurement's cost, not the server's. A bench that calls the code under test in its own process keeps them
 * (`keepBenchFrames`): there the code under test runs beneath the bench's frames; the profiler's own calls
 * (node:inspector, e.g. serialising the profile at `Profiler.stop`) are left out either way.
 */
export function summariseProfile(profile: Profiler.Profile, top = 15, options: { keepBenchFrames?: boolean } = {}): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const ancestry = (id: number): Profiler.ProfileNode[] => {
    const chain: Profiler.ProfileNode[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) chain.push(byId.get(at)!);
    return chain;
  };

  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + Math.max(0, deltas[i] ?? 0));

  const byArea = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, micros] of self) {
    const node = byId.get(id)!;
    const chain = ancestry(id);
    if (chain.some((n) => n.callFrame.url === 'node:inspector')) continue;
    if (!options.keepBenchFrames && chain.some((n) => /\/dist\/bench\//.test(n.callFrame.url))) continue;
    total += micros;
    const area = areaOf(node.callFrame);
    if (area === 'idle') {
      idle += micros;
      continue;
    }
    byArea.set(area, (byArea.get(area) ?? 0) + micros);
    const name = frameName(node.callFrame);
    byFunction.set(name, (byFunction.get(name) ?? 0) + micros);
    const counted = new Set<string>();
    for (const n of chain) {
      if (!isProject(n.callFrame)) continue;
      const own = frameName(n.callFrame);
      if (counted.has(own)) continue;
      counted.add(own);
      inclusive.set(own, (inclusive.get(own) ?? 0) + micros);
    }
  }
  const busy = total - idle;
  const ranked = (map: Map<string, number>, n: number): ProfileShare[] =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, micros]) => ({ name, share: busy > 0 ? micros / busy : 0 }));
  return {
    busy: total > 0 ? busy / total : 0,
    byArea: ranked(byArea, top),
    topFunctions: ranked(byFunction, top),
    topProjectInclusive: ranked(inclusive, top),
  };
}

/**
 * Runs `work` under V8's sampling profiler in this process and describes where the time went: report lines (the
 * .cpuprofile is kept in the temporary directory, named after `label`). Frames of the bench are kept: the code under
 * test runs beneath them.
 */
export async function profileDuring<T>(label: string, work: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  let result: T;
  try {
    result = await work();
  } catch (error) {
    await session.post('Profiler.stop');
    session.disconnect();
    throw error;
  }
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  const file = path.join(tmpdir(), `${label}-${Date.now()}.cpuprofile`);
  await writeFile(file, JSON.stringify(profile));
  const summary = summariseProfile(profile, 20, { keepBenchFrames: true });
  return {
    result,
    lines: [
      `    main thread ${percent(summary.busy)} busy; shares of its busy time:`,
      `    self time by area: ${summary.byArea.map((a) => `${a.name} ${percent(a.share)}`).join(', ')}`,
      '    self time, top functions:',
      ...summary.topFunctions.map((f) => `      ${percent(f.share).padStart(5)}  ${f.name}`),
      "    the project's functions, inclusive:",
      ...summary.topProjectInclusive.map((f) => `      ${percent(f.share).padStart(5)}  ${f.name}`),
      `    profile: ${file}`,
    ],
  };
}
