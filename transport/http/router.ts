import type { ErrorFormat } from './errors.js';
import type { AnyRoute, HttpMethod } from './route.js';

export type RouteMatch =
  | { readonly kind: 'found'; readonly route: AnyRoute; readonly params: Readonly<Record<string, string>> }
  /**
   * `errorFormat`: the path's operations' own, when they share one (refusing them is part of those operations);
   * `corsMethods`: those of the path's operations called cross-origin (an OPTIONS is then their preflight), and
   * `corsRoutes` those operations.
   */
  | {
      readonly kind: 'method_not_allowed';
      readonly allowed: readonly HttpMethod[];
      readonly errorFormat: ErrorFormat | undefined;
      readonly corsMethods: readonly HttpMethod[];
      readonly corsRoutes: readonly AnyRoute[];
      /** The path has a GET operation that answers HEAD (see `answersHead`), so `Allow` names HEAD. */
      readonly headAllowed: boolean;
    }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'bad_path'; readonly errorFormat: ErrorFormat; readonly cors: boolean };

interface Compiled {
  readonly route: AnyRoute;
  /** Literal segments as strings, parameters as `{ name }`. */
  readonly segments: ReadonlyArray<string | { readonly name: string }>;
}

/** Matches a method and a raw path to a route of the table, decoding path parameters. */
export class Router {
  /** Literal paths resolve with one map lookup; only parameterised shapes are scanned. */
  readonly #literal = new Map<string, Map<HttpMethod, Compiled>>();
  readonly #parameterised: Array<{ readonly parts: readonly string[]; readonly methods: Map<HttpMethod, Compiled> }> = [];

  constructor(routes: readonly AnyRoute[]) {
    for (const route of routes) {
      const segments = route.path
        .split('/')
        .slice(1)
        .map((s) => {
          const param = /^\{([A-Za-z][A-Za-z0-9]*)\}$/.exec(s);
          return param ? { name: param[1]! } : s;
        });
      // Routes that differ only in parameter names share a shape; the table must not hold two of the same shape.
      const parts = segments.map((s) => (typeof s === 'string' ? s : '{}'));
      const literal = parts.every((p) => p !== '{}');
      let methods = literal
        ? this.#literal.get(route.path)
        : this.#parameterised.find((e) => e.parts.join('/') === parts.join('/'))?.methods;
      if (!methods) {
        methods = new Map<HttpMethod, Compiled>();
        if (literal) this.#literal.set(route.path, methods);
        else this.#parameterised.push({ parts, methods });
      }
      if (methods.has(route.method)) throw new Error(`duplicate route ${route.method.toUpperCase()} ${route.path}`);
      methods.set(route.method, { route, segments });
    }
    // `match` takes the first shape that fits, and two may fit one path (`…/grants/introspect` and `…/grants/{grantId}`):
    // the more specific one is meant, a literal segment before a parameter at the first place they differ. Kept in the
    // route table's order, which one answered depended on the order in which the features listed their routes.
    this.#parameterised.sort((a, b) => {
      // Shapes of different lengths never fit the same path; ordered by length only so the order stays consistent.
      if (a.parts.length !== b.parts.length) return a.parts.length - b.parts.length;
      for (let i = 0; i < a.parts.length; i++) {
        const aParam = a.parts[i] === '{}';
        if (aParam !== (b.parts[i] === '{}')) return aParam ? 1 : -1;
      }
      return 0;
    });
  }

  match(method: string, rawPath: string): RouteMatch {
    const literal = this.#literal.get(rawPath);
    if (literal) return this.#resolve(literal, method, []);
    const parts = rawPath.split('/').slice(1);
    for (const entry of this.#parameterised) {
      if (entry.parts.length !== parts.length) continue;
      if (!entry.parts.every((s, i) => (s === '{}' ? parts[i] !== '' : s === parts[i]))) continue;
      return this.#resolve(entry.methods, method, parts);
    }
    return { kind: 'not_found' };
  }

  #resolve(methods: Map<HttpMethod, Compiled>, method: string, parts: readonly string[]): RouteMatch {
    // HEAD is GET without the body (RFC 9110 §9.3.2): a GET route answers it, unless it has effects; the gateway drops the body.
    const name = method.toLowerCase();
    const get = methods.get('get');
    const headAllowed = get !== undefined && get.route.answersHead !== false;
    const compiled = name === 'head' ? (headAllowed ? get : undefined) : methods.get(name as HttpMethod);
    if (!compiled) {
      const formats = new Set([...methods.values()].map((c) => c.route.errorFormat));
      const cors = [...methods].filter(([, c]) => c.route.cors === true);
      return {
        kind: 'method_not_allowed',
        allowed: [...methods.keys()],
        errorFormat: formats.size === 1 ? [...formats][0] : undefined,
        corsMethods: cors.map(([m]) => m),
        corsRoutes: cors.map(([, c]) => c.route),
        headAllowed,
      };
    }
    const params: Record<string, string> = {};
    try {
      compiled.segments.forEach((s, i) => {
        if (typeof s !== 'string') params[s.name] = decodeURIComponent(parts[i]!);
      });
    } catch {
      return { kind: 'bad_path', errorFormat: compiled.route.errorFormat, cors: compiled.route.cors === true };
    }
    return { kind: 'found', route: compiled.route, params };
  }
}
