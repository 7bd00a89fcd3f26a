/**
 * Text Postgres cannot keep: U+0000 (refused in `text`, and as `\u0000` in `jsonb`) and an unpaired UTF-16 surrogate
 * (refused in `json`/`jsonb`; in a `text` parameter pg would silently store U+FFFD instead). Either, reaching a
 * statement, fails it: a client's mistake answered 500, and inside a group commit every other actor's write of the
 * batch failed with it. So input is checked where it enters (the HTTP gateway, the WebSocket endpoints, the actor
 * host) and refused there.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function isStorableText(text: string): boolean {
  return !UNSTORABLE.test(text);
}

/**
 * The JSON Pointer of the first string (or member name) in `value` that Postgres cannot keep, or undefined when all
 * can be. Walks with its own stack: a body may nest deeper than the call stack goes.
 */
export function unstorableTextAt(value: unknown): string | undefined {
  const pending: Array<readonly [unknown, string]> = [[value, '']];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const [node, pointer] = item;
    if (typeof node === 'string') {
      if (!isStorableText(node)) return pointer;
    } else if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) pending.push([node[i], `${pointer}/${i}`]);
    } else if (typeof node === 'object' && node !== null && !ArrayBuffer.isView(node)) {
      const names = Object.keys(node);
      for (let i = names.length - 1; i >= 0; i--) {
        const name = names[i]!;
        const at = `${pointer}/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;
        if (!isStorableText(name)) return at;
        pending.push([(node as Record<string, unknown>)[name], at]);
      }
    }
  }
  return undefined;
}
