// api.js - the REST client the UI uses: the same public endpoints scripts use.
//
// Every call rejects with an ApiError carrying the server's JSON `error` message,
// so views can show what went wrong (bad selector, no such type, server down).

export class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

export class Api {
  // tenant: sent as X-Scope-OrgID when set (servers run with --multitenancy);
  // token: sent as a bearer token when set (servers run with --auth-file).
  constructor({ tenant = '', token = '' } = {}) { this.tenant = tenant; this.token = token; }

  headers() {
    const h = {};
    if (this.tenant) h['X-Scope-OrgID'] = this.tenant;
    if (this.token) h['Authorization'] = 'Bearer ' + this.token;
    return h;
  }

  url(path, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const s = q.toString();
    return s ? `${path}?${s}` : path;
  }

  async get(path, params) {
    let resp;
    try {
      resp = await fetch(this.url(path, params), { headers: this.headers() });
    } catch (e) {
      throw new ApiError(`cannot reach the server (${e.message})`, 0);
    }
    const text = await resp.text();
    let body;
    try { body = JSON.parse(text); } catch { body = null; }
    if (!resp.ok) throw new ApiError((body && body.error) || `HTTP ${resp.status}: ${text.slice(0, 200)}`, resp.status);
    if (body === null) throw new ApiError(`the server sent something that is not JSON from ${path}`, resp.status);
    return body;
  }

  // A Connect unary call in JSON (Grafana's API): method is "service/Method".
  async connect(method, body) {
    let resp;
    try {
      resp = await fetch('/' + method, { method: 'POST', body: JSON.stringify(body),
                                         headers: { ...this.headers(), 'Content-Type': 'application/json' } });
    } catch (e) {
      throw new ApiError(`cannot reach the server (${e.message})`, 0);
    }
    const doc = await resp.json().catch(() => null);
    if (!resp.ok) throw new ApiError((doc && (doc.error || doc.message)) || `HTTP ${resp.status}`, resp.status);
    return doc || {};
  }

  profileTypes() { return this.get('/api/v1/profile-types'); }
  labelNames(query, from, until) { return this.get('/api/v1/labels', { query, from, until }); }
  labelValues(name, query, from, until) {
    return this.get(`/api/v1/labels/${encodeURIComponent(name)}/values`, { query, from, until });
  }
  // filters: { focus, ignore, hide } regexes (pprof's stack filters), each optional.
  flamegraph(query, from, until, profile, filters) {
    return this.get('/api/v1/query', { query, from, until, profile, format: 'flamegraph', ...filters });
  }
  top(query, from, until, profile, filters) {
    return this.get('/api/v1/query', { query, from, until, profile, format: 'top', ...filters });
  }
  timeseries(query, from, until, filters) { return this.get('/api/v1/timeseries', { query, from, until, ...filters }); }
  profiles(query, from, until, limit) { return this.get('/api/v1/profiles', { query, from, until, limit }); }
  diff(p) { return this.get('/api/v1/diff', p); }
  // format: 'sandwich', 'lines' or 'source', for one function.
  functionView(format, query, from, until, fn, filters) {
    return this.get('/api/v1/query', { query, from, until, format, function: fn, ...filters });
  }
  pprofUrl(query, from, until, profile, filters) {
    return this.url('/api/v1/query', { query, from, until, profile, format: 'pprof', ...filters });
  }
}
