// The platform API client of the console: the pk_ token from session storage as a bearer
// header on every call (never in a URL), JSON in and out, errors as ApiError with the
// platform's code and message.

const KEY = 'svc.console.token';

export function token() { return sessionStorage.getItem(KEY) || ''; }
export function setToken(t) { sessionStorage.setItem(KEY, t); }
export function clearToken() { sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message || code || ('HTTP ' + status));
    this.status = status; this.code = code || ''; this.body = body || {};
  }
}

// call sends method path (a platform path, or an absolute agent URL with opts.bearer) and answers
// the decoded JSON (null for an empty body).
export async function call(method, path, body, opts = {}) {
  const headers = { 'Authorization': 'Bearer ' + (opts.bearer || token()) };
  const init = { method, headers, signal: opts.signal };
  if (body !== undefined && body !== null) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (opts.headers) Object.assign(headers, opts.headers);
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = text; } }
  if (!resp.ok) {
    const err = (data && data.error) || {};
    const code = typeof err === 'string' ? err : err.code;
    const message = typeof err === 'string' ? (data.message || err) : err.message;
    throw new ApiError(resp.status, code, message, data);
  }
  return data;
}

export const get = (p, o) => call('GET', p, null, o);
export const post = (p, b, o) => call('POST', p, b === undefined ? {} : b, o);
export const put = (p, b, o) => call('PUT', p, b, o);
export const del = (p, o) => call('DELETE', p, null, o);

// stream opens path and hands each chunk of its body (text) to onText until it ends.
export async function stream(path, onText, opts = {}) {
  const resp = await fetch(path, { headers: { 'Authorization': 'Bearer ' + token() }, signal: opts.signal });
  if (!resp.ok) {
    let msg = 'HTTP ' + resp.status;
    try { const d = await resp.json(); msg = d.error.message || msg; } catch { /* not JSON */ }
    throw new ApiError(resp.status, '', msg);
  }
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    onText(dec.decode(value, { stream: true }));
  }
}
