// The console's app: sign-in, client-side routes under /console, and the pages. Every call goes
// through api.js to the platform API with the signed-in pk_ token; what the token's kind may not
// do is disabled (data-need) and the API refuses it anyway.
import * as api from './api.js';
import { h, age, badge, json, toast, errorBox, confirmAction } from './dom.js';

const KINDS = { observer: 1, operator: 2, admin: 3 };
const state = { self: null, selfP: Promise.resolve() };
const main = document.getElementById('main');
const PAGE = 20; // deployments per page

// allows reports whether the signed-in token's kind may make a call that needs kind need.
export function allows(need) {
  return !!state.self && (KINDS[state.self.kind] || 0) >= (KINDS[need] || 0);
}

// gate disables every control under root whose data-need the token's kind does not reach
// (until the kind is known, all of them), and enables again those it disabled once the kind
// allows them.
function gate(root) {
  for (const el of root.querySelectorAll('[data-need]')) {
    if (allows(el.dataset.need)) {
      if (el.dataset.gated) { el.disabled = false; delete el.dataset.gated; el.removeAttribute('title'); }
      continue;
    }
    if (!el.disabled) {
      el.disabled = true;
      el.dataset.gated = '1';
      el.title = 'needs a token of kind ' + el.dataset.need + (state.self ? ' (this token is ' + state.self.kind + ')' : '');
    }
  }
}
new MutationObserver(() => gate(main)).observe(main, { childList: true, subtree: true });

export function navigate(path) {
  history.pushState(null, '', path);
  route();
}

document.addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
  const href = a.getAttribute('href');
  if (href && href.startsWith('/console') && !a.target) { e.preventDefault(); navigate(href); }
});
window.addEventListener('popstate', route);
document.getElementById('signout').addEventListener('click', () => {
  api.clearToken(); state.self = null; navigate('/console/signin');
});

function link(path, text) { return h('a', { href: path }, text); }
function short(s) { return s ? s.slice(0, 8) : '—'; }

function setPage(title, ...nodes) {
  document.title = title + ' · svc console';
  main.replaceChildren(h('h1', {}, title), ...nodes);
  gate(main);
  performance.mark('console:rendered'); // what the benchmark reads: navigation start to this page drawn
  main.focus({ preventScroll: true });
}

async function loadSelf() {
  if (!api.token()) { state.self = null; return; }
  if (state.self) return;
  const self = await api.get('/api/tokens/self');
  if (api.token()) state.self = self;
}

function renderChrome() {
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  const out = document.getElementById('signout');
  if (state.self) {
    nav.replaceChildren(link('/console/', 'Agents'));
    who.textContent = state.self.name + ' · ' + state.self.kind + (state.self.agentId ? ' · bound to ' + state.self.agentId : '');
    who.dataset.kind = state.self.kind;
    out.hidden = false;
  } else {
    nav.replaceChildren(); who.textContent = ''; out.hidden = true;
  }
}

// route renders the page of location.pathname.
export async function route() {
  const path = location.pathname.replace(/\/+$/, '') || '/console';
  if (!api.token() || path === '/console/signin') { state.self = null; renderChrome(); return renderSignIn(); }
  // Who the token is loads beside the page's own calls, not before them: the page renders with
  // its guarded buttons disabled and gate enables what the kind allows once it is known.
  if (!state.self) {
    state.selfP = loadSelf().then(() => { renderChrome(); gate(main); }, (err) => {
      api.clearToken(); state.self = null; renderChrome(); renderSignIn(err);
    });
  }
  renderChrome();
  const m = (re) => path.match(re);
  let r;
  try {
    if (path === '/console' || path === '/console/agents') return await renderAgents();
    if ((r = m(/^\/console\/agents\/([^/]+)$/))) return await renderAgent(r[1]);
    if ((r = m(/^\/console\/agents\/([^/]+)\/settings$/))) return await renderSettings(r[1]);
    if ((r = m(/^\/console\/agents\/([^/]+)\/sessions$/))) return await renderSessions(r[1]);
    if ((r = m(/^\/console\/agents\/([^/]+)\/automations$/))) return await renderAutomations(r[1]);
    if ((r = m(/^\/console\/agents\/([^/]+)\/playground$/))) return await (await import('./playground.js')).renderPlayground(main, r[1], { setPage, allows, gate, ready: () => state.selfP });
    if ((r = m(/^\/console\/deployments\/([^/]+)$/))) return await renderDeployment(r[1]);
    if ((r = m(/^\/console\/builds\/([^/]+)$/))) return await renderBuild(r[1]);
    setPage('Not found', h('p', {}, 'No console page at ' + path + '. '), link('/console/', 'Agents'));
  } catch (err) {
    setPage('Error', errorBox(err));
  }
}

function renderSignIn(err) {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, placeholder: 'pk_…', size: 60 });
  const msg = h('div', {});
  if (err) msg.append(errorBox(err));
  const form = h('form', { id: 'signin', onsubmit: async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    msg.replaceChildren();
    if (!t.startsWith('pk_')) { msg.append(errorBox({ message: 'token: a platform token starts with pk_' })); return; }
    api.setToken(t); state.self = null;
    try { await loadSelf(); } catch (e2) { api.clearToken(); state.self = null; msg.append(errorBox(e2)); return; }
    navigate('/console/');
  } },
  h('label', { for: 'token' }, 'Platform token (pk_…): kept in this tab\'s session storage only'),
  h('div', { class: 'row' }, input, h('button', { class: 'primary', type: 'submit' }, 'Sign in')), msg);
  setPage('Sign in', form);
  input.focus();
}

async function renderAgents() {
  const { agents } = await api.get('/api/agents');
  const rows = agents.map((a) => h('tr', {},
    h('td', {}, link('/console/agents/' + a.agentId, a.name)),
    h('td', { class: 'mono' }, a.slug),
    h('td', { class: 'opt' }, a.source ? a.source.type : '—'),
    h('td', { class: 'opt' }, age(a.createdAt)),
    h('td', {}, link('/console/agents/' + a.agentId + '/playground', 'Playground'))));
  const name = h('input', { id: 'new-agent-name', required: true, maxlength: 100 });
  const slug = h('input', { id: 'new-agent-slug', maxlength: 40, placeholder: 'derived from the name' });
  const out = h('div', {});
  const create = h('form', { class: 'panel', onsubmit: async (e) => {
    e.preventDefault(); out.replaceChildren();
    try {
      const body = { name: name.value.trim() };
      if (slug.value.trim()) body.slug = slug.value.trim();
      const a = await api.post('/api/agents', body);
      toast('Created agent ' + a.slug);
      navigate('/console/agents/' + a.agentId);
    } catch (err) { out.append(errorBox(err)); }
  } }, h('h2', {}, 'Create an agent'),
  h('label', { for: 'new-agent-name' }, 'Name'), name,
  h('label', { for: 'new-agent-slug' }, 'Slug (optional)'), slug,
  h('div', { class: 'row' }, h('button', { class: 'primary', type: 'submit', id: 'create-agent', 'data-need': 'admin' }, 'Create')), out);
  setPage('Agents', h('div', { class: 'scroll' }, h('table', { id: 'agents' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Slug'), h('th', { class: 'opt' }, 'Source'), h('th', { class: 'opt' }, 'Created'), h('th', {}, ''))),
    h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No agents yet.'))))), create);
}

// flash is a result to show on the next render of a page (a reload after an action).
let flash = null;
function resultBox() {
  const out = h('div', { id: 'action-result', 'aria-live': 'polite' });
  if (flash) { out.append(flash); flash = null; }
  return out;
}
function doneBox(r) {
  return h('div', { class: 'panel ok', role: 'status' }, 'Done' + (r && r.deployId ? ': ' + r.environment + ' serves ' + r.deployId : ''));
}

// action runs fn after a confirmation and shows its result in out; done (a reload) shows it
// again on the page it renders.
async function action(out, question, fn, done) {
  if (!(await confirmAction(question))) return;
  out.replaceChildren(h('p', { class: 'muted' }, 'Working…'));
  try {
    const r = await fn();
    out.replaceChildren(doneBox(r));
    if (done) { flash = doneBox(r); done(r); }
  } catch (err) { out.replaceChildren(errorBox(err)); }
}

function agentLinks(id) {
  return h('div', { class: 'row' },
    link('/console/agents/' + id, 'Overview'), link('/console/agents/' + id + '/settings', 'Settings'),
    link('/console/agents/' + id + '/sessions', 'Sessions & feedback'), link('/console/agents/' + id + '/automations', 'Automations'),
    link('/console/agents/' + id + '/playground', 'Playground'));
}

// renderAgent draws an agent's page with a page of its deployments: cursors holds the before
// cursor of each page from the first ('') to the one shown (the server pages them, PAGE at a
// time). The environments table is filled when the active deployments come: the page does not
// wait for them.
async function renderAgent(id, cursors = ['']) {
  const base = '/api/agents/' + id;
  const before = cursors[cursors.length - 1];
  const activeP = api.get(base + '/deployments?active=true&limit=500');
  activeP.catch(() => {}); // shown in the environments table, or not at all when the page fails
  const [agent, { deployments, next }] = await Promise.all([api.get(base),
    api.get(base + '/deployments?limit=' + PAGE + (before ? '&before=' + encodeURIComponent(before) : ''))]);
  const out = resultBox();
  const reload = () => renderAgent(id, cursors);
  // Environments: the active deployment of each environment, and those of this page's
  // deployments whose environment has none.
  const envs = new Map();
  const envRow = ([env, d]) => h('tr', { 'data-env': env },
    h('td', {}, env),
    h('td', { class: 'mono' }, d ? link('/console/deployments/' + d.deployId, d.deployId) : '—'),
    h('td', { class: 'mono' }, d ? short(d.commit) : ''),
    h('td', {}, d ? badge(d.status) : 'nothing active'),
    h('td', {}, d ? age(d.activatedAt || d.readyAt) : ''),
    h('td', {}, h('button', { 'data-need': 'operator', class: 'danger', 'data-rollback': env, onclick: () => action(out,
      'Roll back ' + env + ' to the deployment it served before?',
      () => api.post('/api/deployments/rollback', { agentId: agent.agentId, environment: env }), reload) }, 'Roll back')));
  const envBody = h('tbody', {}, h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'Loading…')));
  // Promote.
  const from = h('select', { id: 'promote-from' });
  const promoteButton = h('button', { 'data-need': 'operator', id: 'promote', onclick: () => promote(false), disabled: true }, 'Promote');
  const to = h('input', { id: 'promote-to', value: 'production', size: 14 });
  const promote = async (force) => {
    const body = { agentId: agent.agentId, fromEnvironment: from.value, toEnvironment: to.value.trim() || 'production' };
    if (force) body.force = true;
    if (!(await confirmAction((force ? 'Force-promote' : 'Promote') + ' what ' + body.fromEnvironment + ' serves to ' + body.toEnvironment + '?'))) return;
    out.replaceChildren(h('p', { class: 'muted' }, 'Working…'));
    try {
      const r = await api.post('/api/deployments/promote', body);
      out.replaceChildren(doneBox(r));
      flash = doneBox(r);
      reload();
    } catch (err) {
      out.replaceChildren(errorBox(err));
      if (err.code === 'EVAL_GATE_BLOCKED') {
        const src = envs.get(body.fromEnvironment);
        if (src) out.append(await evalsView(src.deployId));
        out.append(h('button', { 'data-need': 'operator', class: 'danger', id: 'force-promote', onclick: () => promote(true) }, 'Force promote'));
      }
    }
  };
  // Deploy (redeploy) and upload.
  const env = h('input', { id: 'deploy-env', value: 'production', size: 14 });
  const branch = h('input', { id: 'deploy-branch', placeholder: 'source default', size: 14 });
  const files = h('textarea', { id: 'upload-files', placeholder: '{"svc.json": "…", "agents/default/AGENT.md": "…"}' });
  const folder = h('input', { type: 'file', id: 'upload-folder', webkitdirectory: true, multiple: true });
  const deploy = async () => {
    const body = { agentId: agent.agentId, environment: env.value.trim() || 'production' };
    if (branch.value.trim()) body.branch = branch.value.trim();
    if (!(await confirmAction('Build and deploy ' + agent.slug + ' to ' + body.environment + '?'))) return;
    try {
      const r = await api.post('/api/deployments/redeploy', body);
      navigate('/console/builds/' + r.buildId + '?deploy=' + r.deployId);
    } catch (err) { out.replaceChildren(errorBox(err)); }
  };
  const upload = async () => {
    out.replaceChildren();
    let tree = {};
    try {
      if (folder.files.length) {
        for (const f of folder.files) tree[f.webkitRelativePath.split('/').slice(1).join('/')] = await f.text();
      } else {
        tree = JSON.parse(files.value || '{}');
      }
    } catch (err) { out.append(errorBox({ message: 'files: not a JSON object of path to text (' + err.message + ')' })); return; }
    try {
      const r = await api.post('/api/agents/' + agent.agentId + '/source-versions', { files: tree });
      out.append(h('div', { class: 'panel ok', role: 'status', id: 'upload-result' }, 'Uploaded source version ' + r.sourceVersionId + ' (' + r.digest + ')'));
    } catch (err) {
      out.append(errorBox(err));
      if (err.body && err.body.error && err.body.error.problems) {
        out.append(h('ul', {}, err.body.error.problems.map((p) => h('li', {}, p.file + (p.line ? ':' + p.line : '') + ': ' + p.message))));
      }
    }
  };
  // Deployments, newest first, a page at a time.
  const depRows = deployments.map((d) => h('tr', {},
    h('td', { class: 'mono' }, link('/console/deployments/' + d.deployId, d.deployId), d.isActive ? ' ' : '', d.isActive ? badge('active', 'active') : ''),
    h('td', {}, d.environment), h('td', {}, badge(d.status)),
    h('td', { class: 'mono opt' }, short(d.commit) + (d.branch ? ' ' + d.branch : '')),
    h('td', { class: 'opt' }, age(d.createdAt)),
    h('td', {}, link('/console/builds/' + d.buildId + '?deploy=' + d.deployId, 'build'), ' ',
      h('button', { 'data-need': 'operator', disabled: d.status !== 'ready' || d.isActive, 'data-activate': d.deployId, onclick: () => action(out,
        'Activate ' + d.deployId + ' in ' + d.environment + '?', () => api.post('/api/deployments/' + d.deployId + '/activate'), reload) }, 'Activate'))));
  const pager = h('div', { class: 'row' },
    h('button', { id: 'newer', disabled: cursors.length === 1, onclick: () => renderAgent(id, cursors.slice(0, -1)) }, 'Newer'),
    h('span', { class: 'muted', id: 'deployments-page' }, 'page ' + cursors.length + (next ? '' : ' (the last)')),
    h('button', { id: 'older', disabled: !next, onclick: () => renderAgent(id, [...cursors, next]) }, 'Older'));
  setPage(agent.name,
    h('p', { class: 'muted' }, agent.slug + ' · ', h('span', { class: 'mono' }, agent.url)), agentLinks(agent.agentId), out,
    h('h2', {}, 'Environments'),
    h('div', { class: 'scroll' }, h('table', { id: 'environments' }, h('thead', {}, h('tr', {}, ['Environment', 'Active deployment', 'Commit', 'Status', 'Age', ''].map((t) => h('th', {}, t)))),
      envBody)),
    h('div', { class: 'row' }, h('label', { for: 'promote-from' }, 'Promote from'), from, h('label', { for: 'promote-to' }, 'to'), to,
      promoteButton),
    h('h2', {}, 'Deploy'),
    h('div', { class: 'panel' },
      h('p', { class: 'muted' }, 'A git-sourced agent builds its branch head; a hosted one its newest source version: upload one first (a folder, or a JSON object of path to text).'),
      h('label', { for: 'upload-folder' }, 'Folder'), folder,
      h('label', { for: 'upload-files' }, 'or files as JSON'), files,
      h('div', { class: 'row' }, h('button', { 'data-need': 'operator', id: 'upload', onclick: upload }, 'Upload source version')),
      h('div', { class: 'row' }, h('label', { for: 'deploy-env' }, 'Environment'), env, h('label', { for: 'deploy-branch' }, 'Branch'), branch,
        h('button', { 'data-need': 'operator', class: 'primary', id: 'deploy', onclick: deploy }, 'Deploy'))),
    h('h2', {}, 'Deployments'),
    h('div', { class: 'scroll' }, h('table', { id: 'deployments' }, h('thead', {}, h('tr', {}, ['Deployment', 'Environment', 'Status', 'Commit', 'Created', ''].map((t, i) => h('th', { class: i === 3 || i === 4 ? 'opt' : '' }, t)))),
      h('tbody', {}, depRows))), pager);
  try {
    for (const d of (await activeP).deployments) envs.set(d.environment, d);
  } catch (err) {
    envBody.replaceChildren(h('tr', {}, h('td', { colspan: 6 }, errorBox(err))));
    return;
  }
  for (const d of deployments) if (!envs.has(d.environment)) envs.set(d.environment, null);
  envBody.replaceChildren(...(envs.size ? [...envs].map(envRow) : [h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'Nothing deployed yet.'))]));
  from.replaceChildren(...[...envs.keys()].map((e) => h('option', { value: e }, e)));
  if (envs.size) { promoteButton.disabled = false; gate(main); }
}

async function evalsView(deployId) {
  try {
    const run = await api.get('/api/deployments/' + deployId + '/evals');
    const box = h('div', { class: 'panel', id: 'evals' }, h('h3', {}, 'Evals of ' + deployId + ': ', badge(run.state)));
    const res = run.result || {};
    for (const ev of res.evals || res.Evals || []) {
      const name = ev.name || ev.Name; const status = ev.status || ev.Status;
      const list = h('ul', {});
      for (const a of ev.assertions || ev.Assertions || []) {
        list.append(h('li', {}, badge(a.status || a.Status), ' ', a.text || a.Text || '', ' ', h('span', { class: 'muted' }, a.reason || a.Reason || '')));
      }
      box.append(h('div', {}, badge(status), ' ', name), list);
    }
    if (!(res.evals || res.Evals)) box.append(h('pre', {}, json(run)));
    return box;
  } catch (err) {
    return err.status === 404 ? h('p', { class: 'muted' }, 'No eval run for ' + deployId + '.') : errorBox(err);
  }
}

async function renderDeployment(id) {
  const d = await api.get('/api/deployments/' + id);
  const out = resultBox();
  const reload = () => renderDeployment(id);
  const fields = ['deployId', 'agentId', 'environment', 'status', 'isActive', 'runtime', 'commit', 'branch', 'sourceVersionId', 'buildId', 'url', 'createdAt', 'readyAt', 'activatedAt', 'promotedFrom', 'error', 'runtimeError'];
  const table = h('table', { id: 'deployment' }, h('tbody', {}, fields.filter((f) => d[f] !== undefined && d[f] !== null && d[f] !== '').map((f) =>
    h('tr', {}, h('th', {}, f), h('td', { class: 'mono' }, f === 'buildId' ? link('/console/builds/' + d.buildId + '?deploy=' + d.deployId, d.buildId) : String(d[f]))))));
  const snapshot = h('div', {}, h('p', { class: 'muted' }, 'Loading the snapshot…'));
  const evals = h('div', {});
  setPage('Deployment ' + d.deployId, agentLinks(d.agentId), out,
    h('div', { class: 'row' },
      h('button', { 'data-need': 'operator', disabled: d.status !== 'ready' || d.isActive, onclick: () => action(out, 'Activate ' + id + ' in ' + d.environment + '?', () => api.post('/api/deployments/' + id + '/activate'), reload) }, 'Activate'),
      h('button', { 'data-need': 'operator', onclick: async () => {
        if (!(await confirmAction('Build ' + d.environment + ' again from ' + (d.branch || 'the newest source') + '?'))) return;
        try {
          const body = { agentId: d.agentId, environment: d.environment };
          if (d.branch) body.branch = d.branch;
          const r = await api.post('/api/deployments/redeploy', body);
          navigate('/console/builds/' + r.buildId + '?deploy=' + r.deployId);
        } catch (err) { out.replaceChildren(errorBox(err)); }
      } }, 'Redeploy'),
      h('button', { 'data-need': 'operator', disabled: d.status !== 'ready', onclick: () => action(out, (d.runtime === 'stopped' ? 'Start' : 'Stop') + ' the runtime of ' + id + '?',
        () => api.post('/api/deployments/' + id + '/runtime/' + (d.runtime === 'stopped' ? 'start' : 'stop')), reload) }, d.runtime === 'stopped' ? 'Start runtime' : 'Stop runtime'),
      h('button', { 'data-need': 'operator', disabled: d.status !== 'ready', onclick: () => action(out, 'Run the evals of ' + id + '?', () => api.post('/api/deployments/' + id + '/evals'), reload) }, 'Run evals'),
      link('/console/agents/' + d.agentId + '/playground?deploy=' + d.deployId, 'Chat with this deployment')),
    h('div', { class: 'scroll' }, table), h('h2', {}, 'Eval runs'), evals, h('h2', {}, 'Snapshot'), snapshot);
  evals.replaceChildren(await evalsView(id));
  try {
    snapshot.replaceChildren(h('pre', { id: 'snapshot' }, json(await api.get('/api/deployments/' + id + '/snapshot'))));
  } catch (err) { snapshot.replaceChildren(errorBox(err)); }
}

let buildAbort = null;
async function renderBuild(id) {
  if (buildAbort) buildAbort.abort();
  buildAbort = new AbortController();
  const signal = buildAbort.signal;
  const deployId = new URLSearchParams(location.search).get('deploy');
  const status = h('div', { id: 'build-status' });
  const log = h('pre', { class: 'log', id: 'build-log', 'aria-live': 'off' });
  const end = h('p', { id: 'log-state', class: 'muted', 'aria-live': 'polite' }, 'Streaming the log…');
  const showStatus = async () => {
    const s = await api.get('/api/builds/' + id + '/status');
    status.replaceChildren(
      h('p', {}, 'Build ', h('span', { class: 'mono' }, s.buildId), ' ', badge(s.status), s.commit ? ' commit ' + short(s.commit) : '', s.error ? ' — ' + s.error : ''),
      h('table', { id: 'build-steps' }, h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, 'Status'), h('th', {}, 'Duration'))),
        h('tbody', {}, (s.steps || []).map((st) => h('tr', {}, h('td', {}, st.name), h('td', {}, badge(st.status)), h('td', {}, st.durationMs != null ? st.durationMs + ' ms' : ''))))),
      (s.warnings || []).length ? h('div', { class: 'warn-box' }, h('ul', {}, s.warnings.map((w) => h('li', {}, w)))) : '');
    return s;
  };
  setPage('Build ' + id, deployId ? h('p', {}, 'Deployment ', link('/console/deployments/' + deployId, deployId)) : '', status, h('h2', {}, 'Log'), log, end);
  await showStatus();
  const timer = setInterval(() => { showStatus().catch(() => {}); }, 1000);
  try {
    await api.stream('/api/builds/' + id + '/logs?follow=1', (t) => {
      const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.append(t);
      if (atEnd) log.scrollTop = log.scrollHeight;
    }, { signal });
    const s = await showStatus();
    end.textContent = 'End of the log: the build ' + s.status + '.';
    end.className = s.status === 'succeeded' ? 'ok' : 'bad';
    end.dataset.done = s.status;
  } catch (err) {
    if (!signal.aborted) end.replaceChildren(errorBox(err), 'The log stopped; reload the page to follow it again.');
  } finally { clearInterval(timer); }
}

async function renderSettings(id) {
  const agent = await api.get('/api/agents/' + id);
  const sections = [];
  const section = (title, body) => { const out = h('div', { 'aria-live': 'polite' }); sections.push(h('section', { class: 'panel' }, h('h2', {}, title), body(out), out)); };
  const save = (out, fn) => async (e) => {
    if (e) e.preventDefault();
    out.replaceChildren();
    try { await fn(); out.append(h('p', { class: 'ok', role: 'status' }, 'Saved.')); } catch (err) { out.append(errorBox(err)); }
  };
  // Source.
  section('Git source', (out) => {
    const s = agent.source || {};
    const type = h('select', { id: 'src-type' }, ['git', 'hosted'].map((t) => h('option', { value: t, selected: (s.type || 'git') === t }, t)));
    const url = h('input', { id: 'src-url', value: s.url || '', size: 50 });
    const br = h('input', { id: 'src-branch', value: s.defaultBranch || '' });
    const cred = h('input', { id: 'src-cred', value: s.credentials || '', placeholder: 'env:VAR' });
    const secret = h('input', { id: 'src-secret', type: 'password', placeholder: 'unchanged when empty' });
    return h('form', { onsubmit: save(out, () => {
      const body = { type: type.value };
      if (type.value === 'git') {
        body.url = url.value.trim();
        if (br.value.trim()) body.defaultBranch = br.value.trim();
        if (cred.value.trim()) body.credentials = cred.value.trim();
        if (secret.value) body.webhookSecret = secret.value;
      }
      return api.put('/api/agents/' + id + '/source', body);
    }) }, h('label', { for: 'src-type' }, 'Type'), type, h('label', { for: 'src-url' }, 'Repository URL'), url,
    h('label', { for: 'src-branch' }, 'Default branch'), br, h('label', { for: 'src-cred' }, 'Credentials'), cred,
    h('label', { for: 'src-secret' }, 'Webhook secret'), secret, h('div', { class: 'row' }, h('button', { 'data-need': 'admin', type: 'submit' }, 'Save source')));
  });
  // Deploy settings.
  section('Deploy settings', (out) => {
    const st = agent.settings || {};
    const pb = h('input', { id: 'set-branch', value: st.productionBranch || '' });
    const ad = h('input', { id: 'set-auto', type: 'checkbox', checked: !!st.autoDeploy });
    const ap = h('input', { id: 'set-promote', type: 'checkbox', checked: !!st.autoPromoteProduction });
    return h('form', { onsubmit: save(out, () => api.put('/api/agents/' + id + '/deploy-settings', { productionBranch: pb.value.trim(), autoDeploy: ad.checked, autoPromoteProduction: ap.checked })) },
      h('label', { for: 'set-branch' }, 'Production branch'), pb,
      h('div', { class: 'row' }, ad, h('label', { for: 'set-auto' }, 'Deploy on push')), h('div', { class: 'row' }, ap, h('label', { for: 'set-promote' }, 'Promote production builds at once')),
      h('div', { class: 'row' }, h('button', { 'data-need': 'operator', type: 'submit' }, 'Save settings')));
  });
  // Secrets, by name only.
  section('Secrets', (out) => {
    const list = h('ul', { id: 'secrets' });
    const name = h('input', { id: 'secret-name', placeholder: 'NAME' });
    const value = h('input', { id: 'secret-value', type: 'password', autocomplete: 'off' });
    const load = async () => {
      try {
        const { secrets } = await api.get('/api/agents/' + id + '/secrets');
        list.replaceChildren(...secrets.map((s) => h('li', {}, h('span', { class: 'mono' }, s.name), ' ', h('span', { class: 'muted' }, 'set ' + age(s.updatedAt)), ' ',
          h('button', { 'data-need': 'admin', class: 'danger', onclick: () => action(out, 'Remove secret ' + s.name + '?', () => api.del('/api/agents/' + id + '/secrets/' + encodeURIComponent(s.name)), load) }, 'Remove'))));
        if (!secrets.length) list.append(h('li', { class: 'muted' }, 'No secrets.'));
      } catch (err) { list.replaceChildren(h('li', { class: 'muted' }, err.status === 403 ? 'Listing secrets needs an admin token.' : err.message)); }
    };
    load();
    return h('div', {}, list, h('form', { onsubmit: save(out, async () => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name.value)) throw new api.ApiError(400, 'INVALID_REQUEST', 'name: a secret name is letters, digits and _ and does not start with a digit');
      await api.put('/api/agents/' + id + '/secrets/' + encodeURIComponent(name.value), { value: value.value });
      value.value = ''; load();
    }) }, h('div', { class: 'row' }, h('label', { for: 'secret-name' }, 'Name'), name, h('label', { for: 'secret-value' }, 'Value'), value,
      h('button', { 'data-need': 'admin', type: 'submit' }, 'Set secret'))));
  });
  // API keys.
  section('API keys', (out) => {
    const list = h('ul', { id: 'api-keys' });
    const name = h('input', { id: 'key-name' });
    const load = async () => {
      try {
        const { apiKeys } = await api.get('/api/agents/' + id + '/api-keys');
        list.replaceChildren(...apiKeys.map((k) => h('li', {}, k.name, ' ', h('span', { class: 'mono muted' }, k.id), ' ', h('span', { class: 'muted' }, 'created ' + age(k.createdAt) + (k.lastUsedAt ? ', used ' + age(k.lastUsedAt) : '')), ' ',
          h('button', { 'data-need': 'admin', class: 'danger', onclick: () => action(out, 'Revoke key ' + k.name + '? Every runner refuses it within 5 s.', () => api.del('/api/agents/' + id + '/api-keys/' + k.id), load) }, 'Revoke'))));
        if (!apiKeys.length) list.append(h('li', { class: 'muted' }, 'No keys.'));
      } catch (err) { list.replaceChildren(h('li', { class: 'muted' }, err.status === 403 ? 'Listing keys needs an admin token.' : err.message)); }
    };
    load();
    return h('div', {}, list, h('form', { onsubmit: async (e) => {
      e.preventDefault(); out.replaceChildren();
      try {
        const k = await api.post('/api/agents/' + id + '/api-keys', { name: name.value.trim() });
        out.append(h('div', { class: 'panel' }, 'The key, shown once: ', h('code', {}, k.key)));
        load();
      } catch (err) { out.append(errorBox(err)); }
    } }, h('div', { class: 'row' }, h('label', { for: 'key-name' }, 'Name'), name, h('button', { 'data-need': 'admin', type: 'submit' }, 'Create key'))));
  });
  // Access settings (CONTRACT §8).
  section('Access (sign-in of your users)', (out) => {
    const doc = h('textarea', { id: 'access-doc', placeholder: '{"oidc": {"issuer": "…", "clientId": "…"}, "allow": {"domains": ["example.com"]}}' });
    api.get('/api/agents/' + id + '/access').then((a) => { doc.value = json(a); }).catch((err) => {
      if (err.status !== 404) out.append(h('p', { class: 'muted' }, err.status === 403 ? 'Reading access settings needs an admin token.' : err.message));
    });
    return h('form', { onsubmit: save(out, () => {
      let body;
      try { body = JSON.parse(doc.value); } catch (err) { throw new api.ApiError(400, 'INVALID_REQUEST', 'access: not JSON (' + err.message + ')'); }
      return api.put('/api/agents/' + id + '/access', body);
    }) }, doc, h('div', { class: 'row' }, h('button', { 'data-need': 'admin', type: 'submit' }, 'Save access settings')));
  });
  setPage(agent.name + ': settings', agentLinks(agent.agentId), ...sections);
}

async function renderSessions(id) {
  const params = new URLSearchParams(location.search);
  const userId = h('input', { id: 'f-user', value: params.get('userId') || '' });
  const screen = h('input', { id: 'f-screen', value: params.get('screen') || '' });
  const sessions = h('div', {}); const feedback = h('div', {});
  const query = (before) => {
    const q = new URLSearchParams();
    if (userId.value.trim()) q.set('userId', userId.value.trim());
    if (screen.value.trim()) q.set('screen', screen.value.trim());
    if (before) q.set('before', before);
    return q.toString();
  };
  const list = async (box, kind, before) => {
    try {
      const r = await api.get('/api/agents/' + id + '/' + kind + '?' + query(before));
      const items = r[kind];
      const rows = items.map((s) => kind === 'sessions'
        ? h('tr', {}, h('td', { class: 'mono' }, s.sessionId), h('td', {}, s.title || ''), h('td', {}, s.owner || ''), h('td', { class: 'opt' }, json(s.metadata || {})), h('td', {}, age(s.updatedAt)))
        : h('tr', {}, h('td', { class: 'mono' }, s.sessionId || ''), h('td', {}, String(s.rating ?? s.value ?? '')), h('td', {}, s.comment || ''), h('td', { class: 'opt' }, s.userId || ''), h('td', {}, age(s.createdAt))));
      if (!before) box.replaceChildren();
      box.append(h('div', { class: 'scroll' }, h('table', {}, h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { class: 'muted' }, 'None.'))))));
      if (r.next) box.append(h('button', { onclick: (e) => { e.target.remove(); list(box, kind, r.next); } }, 'Older'));
    } catch (err) { box.replaceChildren(errorBox(err)); }
  };
  const apply = (e) => {
    if (e) e.preventDefault();
    history.replaceState(null, '', location.pathname + (query() ? '?' + query() : ''));
    list(sessions, 'sessions'); list(feedback, 'feedback');
  };
  setPage('Sessions and feedback', agentLinks(id),
    h('form', { class: 'row', onsubmit: apply }, h('label', { for: 'f-user' }, 'userId'), userId, h('label', { for: 'f-screen' }, 'screen'), screen, h('button', { type: 'submit' }, 'Filter')),
    h('h2', {}, 'Sessions'), sessions, h('h2', {}, 'Feedback'), feedback);
  apply();
}

async function renderAutomations(id) {
  const agent = await api.get('/api/agents/' + id);
  const out = h('div', { 'aria-live': 'polite' });
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  setPage(agent.name + ': automations', agentLinks(agent.agentId), out, box);
  await state.selfP;
  if (!allows('operator')) {
    box.replaceChildren(h('p', { class: 'muted' }, 'Automations are read on the agent\'s runtime with a runtime token, which only an operator or admin token may mint.'));
    return;
  }
  let tok;
  try { tok = (await api.post('/api/agents/' + agent.agentId + '/tokens', { ttl: 600 })).token; } catch (err) { box.replaceChildren(errorBox(err)); return; }
  const rt = (method, path, body) => api.call(method, agent.url + path, body, { bearer: tok });
  try {
    const { automations } = await rt('GET', '/api/automations');
    box.replaceChildren(h('div', { class: 'scroll' }, h('table', { id: 'automations' },
      h('thead', {}, h('tr', {}, ['Name', 'Trigger', 'Action', 'Enabled', ''].map((t) => h('th', {}, t)))),
      h('tbody', {}, automations.length ? automations.map((a) => {
        const runs = h('td', { colspan: 5 });
        return [h('tr', {}, h('td', {}, a.name), h('td', { class: 'mono' }, JSON.stringify(a.trigger)), h('td', { class: 'mono' }, JSON.stringify(a.action)), h('td', {}, String(a.enabled)),
          h('td', {}, h('button', { onclick: async () => {
            try {
              const r = await rt('GET', '/api/automations/' + a.id + '/runs');
              runs.replaceChildren(h('table', {}, h('tbody', {}, r.runs.map((x) => h('tr', {}, h('td', {}, x.fire_time), h('td', {}, badge(x.status)), h('td', { class: 'mono' }, x.session_id || ''), h('td', {}, x.done_reason || x.error || ''))))));
            } catch (err) { runs.replaceChildren(errorBox(err)); }
          } }, 'Runs'), ' ',
          h('button', { 'data-need': 'operator', onclick: () => action(out, 'Fire ' + a.name + ' now?', () => rt('POST', '/api/automations/' + a.id + '/run')) }, 'Run now'))),
        h('tr', {}, runs)];
      }) : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No automations (create them with svc automations create or the runtime API).'))))));
  } catch (err) { box.replaceChildren(errorBox(err)); }
}

route();
