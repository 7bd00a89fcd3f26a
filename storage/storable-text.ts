/**
 * Text Postgres cannot keep: U+0000 (refused in `text`, and as `\u0000` in `jsonb`) and an unpaired UTF-16 surrogate
 * (refused in `json`/`jsonb`; in a `text` parameter pg would silently store U+FFFD instead). Either, reaching a
 * statement, fails it: a client's mistake answered 500, and inside a group commit every other actor's write of the
 * batch failed with it. So input is checked where it enters (the HTTP gateway, the WebSocket endpoints, the actor
 * host) and refused there.
 */
function isStorableText(text: string): boolean {
  return text.isWellFormed() && !text.includes('\u0000');
}

/**
 * The JSON Pointer of the first string (or member name) in `value` that Postgres cannot keep, or undefined when all
 * can be. Walks with its own stack: a body may nest deeper than the call stack goes. Every message and event passes
 * through here, so the walk builds no pointer until it has found something to point at.
 */
export function unstorableTextAt(value: unknown): string | undefined {
  const pending: unknown[] = [value];
  for (let node = pending.pop(); pending.length > 0 || node !== undefined; node = pending.pop()) {
    if (typeof node === 'string') {
      if (!isStorableText(node)) return pointerToUnstorable(value);
    } else if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) pending.push(node[i]);
    } else if (typeof node === 'object' && node !== null && !ArrayBuffer.isView(node)) {
      for (const name in node) {
        if (!Object.hasOwn(node, name)) continue;
        if (!isStorableText(name)) return pointerToUnstorable(value);
        pending.push((node as Record<string, unknown>)[name]);
      }
    }
  }
  return undefined;
}

/** The walk again, in document order and with pointers, once `value` is known to hold unstorable text. */
function pointerToUnstorable(value: unknown): string | undefined {
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
