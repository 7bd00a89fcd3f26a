/** Cookies of the registry's own origin. Every one is `__Host-` prefixed: Secure, Path=/, no Domain, so a sibling
 * host cannot plant or shadow it. */

export function readCookie(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  const header = headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(/;\s*|,\s*/)) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq) === name) return part.slice(eq + 1);
  }
  return undefined;
}

export interface CookieOptions {
  readonly maxAgeSeconds: number;
  /** `Strict` unless the cookie must ride a top-level navigation from another site (the OIDC authorization page). */
  readonly sameSite: 'Strict' | 'Lax';
}

export function setCookie(name: string, value: string, options: CookieOptions): string {
  return `${name}=${value}; Path=/; Max-Age=${options.maxAgeSeconds}; HttpOnly; Secure; SameSite=${options.sameSite}`;
}

export function clearCookie(name: string): string {
  return `${name}=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict`;
}
