import type { AuthorizationRequest } from './authorization-request.js';

/** The registry's own pages of the authorization flow: server-rendered, no script, nothing loaded from elsewhere. */

const escape = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** What an error page carries for support and tools, as every error does: its stable code and the request id. */
export interface PageError {
  readonly code: string;
  readonly requestId: string;
}

function page(title: string, body: string, error?: PageError): string {
  const meta = error ? `<meta name="registry-error-code" content="${escape(error.code)}"><meta name="registry-request-id" content="${escape(error.requestId)}">` : '';
  const footer = error ? `<p><small>Error <code>${escape(error.code)}</code>, request <code>${escape(error.requestId)}</code></small></p>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">${meta}
<title>${escape(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;padding:.5rem 1rem;margin-right:.5rem}</style>
</head><body><h1>${escape(title)}</h1>${body}${footer}</body></html>`;
}

/**
 * The CSP source of the client the consent form's answer redirects to (form-action also governs that redirect): its
 * origin, except for an IPv6 literal, which a CSP host-source cannot spell (its grammar has no brackets or colons):
 * a browser drops `http://[::1]:port` from the list and then blocks the redirect to the CLI's loopback listener. Such
 * a redirect URI is the loopback one (`http://[::1]:port/…`), so the source is its scheme and port on any host.
 */
function formTargetSource(target: string): string {
  const url = new URL(target);
  return url.hostname.startsWith('[') ? `${url.protocol}//*:${url.port || '80'}` : url.origin;
}

/** Headers of every authorization page: not framable (no clickjacking of the consent), forms only to us and the client. */
export function pageHeaders(formTarget?: string): Record<string, string> {
  const formAction = formTarget ? `'self' ${formTargetSource(formTarget)}` : `'self'`;
  return {
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  };
}

export function errorPage(message: string, error: PageError): string {
  return page('This sign-in cannot continue', `<p>${escape(message)}</p><p>Close this page and try again from the application.</p>`, error);
}

/** `page_session_required`: the 401 of the authorization page, which is a page to show, not a body to parse. */
export function signInPage(requestId: string): string {
  return page(
    'Sign in with your desktop app',
    '<p>Open the desktop app on this computer and sign in to the registry there, then reload this page.</p>',
    { code: 'page_session_required', requestId },
  );
}

/** What each scope lets the client do, as the consent page says it (HTML; the handle is escaped here). */
const SCOPE_TEXT: Readonly<Record<string, (handle: string) => string>> = {
  openid: (handle) => `know you as <strong>@${escape(handle)}</strong>`,
  management: () => 'act for you on the registry: manage your projects, publications and credentials until you end this sign-in',
  runtime: () => 'open sessions as you in this Environment: presence, settings, Apps and Plugin grants',
};

export function consentPage(input: { request: AuthorizationRequest; handle: string; origin: string; csrf: string }): string {
  const { request } = input;
  const hidden = {
    response_type: 'code',
    client_id: request.client.clientId,
    redirect_uri: request.redirectUri,
    scope: request.scopes.join(' '),
    state: request.state,
    nonce: request.nonce,
    code_challenge: request.codeChallenge,
    code_challenge_method: 'S256',
    max_age: request.maxAgeSeconds === null ? undefined : String(request.maxAgeSeconds),
    csrf: input.csrf,
  };
  const fields = Object.entries(hidden)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${name}" value="${escape(value!)}">`)
    .join('');
  // Every scope the form grants is on the page: what the person agrees to is what the client gets.
  const granted = request.scopes
    .map((scope) => `<li data-scope="${escape(scope)}">${Object.hasOwn(SCOPE_TEXT, scope) ? SCOPE_TEXT[scope]!(input.handle) : escape(scope)}</li>`)
    .join('');
  return page(
    `Continue to ${request.client.name}`,
    `<p><strong>${escape(request.client.name)}</strong> (${escape(input.origin)}) asks to:</p>
<ul>${granted}</ul>
<form method="post" action="/v1/oidc/authorize">${fields}
<button type="submit" name="decision" value="allow">Continue</button>
<button type="submit" name="decision" value="deny">Cancel</button></form>`,
  );
}
