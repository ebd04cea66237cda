// The playground: chat with any deployment of an agent (its persistent URL or a pinned one)
// through a short-lived runtime token minted for it, reading the SSE stream of POST /chat/stream
// with fetch (EventSource cannot send a bearer header). Frames render as they arrive: text,
// folded thinking, tool cards (nested under parent_tool_id), widgets, approvals, questions,
// durable pauses, warnings, errors and the done line.
import * as api from './api.js';
import { readSSE } from './sse.js';
import { h, json, errorBox } from './dom.js';

const TRACE_KEY = 'svc.console.traceURL';

export async function renderPlayground(main, agentId, { setPage, allows, ready }) {
  const agent = await api.get('/api/agents/' + agentId);
  const deployments = await api.get('/api/agents/' + agentId + '/deployments');
  const pinned = new URLSearchParams(location.search).get('deploy');
  const target = h('select', { id: 'pg-target' },
    h('option', { value: agent.url }, 'Persistent URL (production): ' + agent.url),
    deployments.filter((d) => d.status === 'ready').map((d) => h('option', { value: d.url, selected: d.deployId === pinned },
      d.deployId + ' · ' + d.environment + (d.isActive ? ' (active)' : ''))));
  await ready();
  if (!allows('operator')) {
    setPage('Playground: ' + agent.name, h('p', { class: 'muted' }, 'The playground chats through a runtime token, which only an operator or admin token may mint.'));
    return;
  }
  const input = h('textarea', { id: 'pg-message', placeholder: 'Message (Ctrl+Enter sends). With the echo model, /tool NAME {json} calls a tool.', rows: 3 });
  const sessionIn = h('input', { id: 'pg-session', placeholder: 'new session', size: 28 });
  const provider = h('select', { id: 'pg-provider' }, ['', 'echo', 'openai', 'anthropic', 'openai-compatible'].map((p) => h('option', { value: p }, p || 'agent default')));
  const model = h('input', { id: 'pg-model', placeholder: 'model name', size: 18 });
  const context = h('textarea', { id: 'pg-context', rows: 2, placeholder: '{"key": "value"}' });
  const metadata = h('textarea', { id: 'pg-metadata', rows: 2, placeholder: '{"userId": "u1", "screen": "home"}' });
  const traceURL = h('input', { id: 'pg-trace', size: 40, value: localStorage.getItem(TRACE_KEY) || '', placeholder: 'trace link, {trace_id} is replaced' });
  traceURL.addEventListener('change', () => localStorage.setItem(TRACE_KEY, traceURL.value.trim()));
  const chat = h('div', { class: 'chat', id: 'pg-chat', 'aria-live': 'polite' });
  const status = h('p', { id: 'pg-status', class: 'muted' });
  const history = h('div', { class: 'history', id: 'pg-history' });
  const send = h('button', { class: 'primary', id: 'pg-send', type: 'submit' }, 'Send');
  const stop = h('button', { id: 'pg-stop', type: 'button', disabled: true }, 'Stop');

  let tok = null; let tokFor = ''; let tokUntil = 0;
  let ctl = null; let sessionId = ''; let lastId = null; let stopped = false;
  const base = () => target.value.replace(/\/+$/, '');
  const bearer = async () => {
    if (!tok || tokFor !== agentId || Date.now() > tokUntil - 60000) {
      const r = await api.post('/api/agents/' + agentId + '/tokens', { ttl: 900 });
      tok = r.token; tokFor = agentId; tokUntil = Date.parse(r.expiresAt) || Date.now() + 900000;
    }
    return tok;
  };
  const rt = async (method, path, body) => api.call(method, base() + path, body, { bearer: await bearer() });

  const loadHistory = async () => {
    try {
      const { sessions } = await rt('GET', '/sessions/history');
      history.replaceChildren(...sessions.slice(0, 50).map((s) => h('button', { type: 'button', onclick: () => openSession(s.session_id) },
        (s.title || s.session_id), h('br'), h('span', { class: 'muted' }, s.status + ' · ' + s.updated_at))));
      if (!sessions.length) history.append(h('p', { class: 'muted' }, 'No sessions yet.'));
    } catch (err) { history.replaceChildren(h('p', { class: 'muted' }, err.message)); }
  };
  const openSession = async (id) => {
    sessionId = id; sessionIn.value = id;
    chat.replaceChildren();
    try {
      const s = await rt('GET', '/sessions/history/' + encodeURIComponent(id));
      for (const m of s.messages || []) {
        if (m.role === 'user') chat.append(h('div', { class: 'msg user' }, m.content));
        else if (m.role === 'assistant') {
          const el = h('div', { class: 'msg assistant' });
          if (m.thinking) el.append(h('details', {}, h('summary', {}, 'Thinking'), h('pre', {}, m.thinking)));
          if (m.content) el.append(h('div', {}, m.content));
          for (const c of m.tool_calls || []) el.append(h('div', { class: 'tool' }, h('strong', {}, c.name), h('pre', {}, json(c.arguments))));
          chat.append(el);
        } else if (m.role === 'tool') chat.append(h('div', { class: 'tool' + (m.is_error ? ' error' : ' success') }, h('span', { class: 'muted' }, 'result of ' + (m.tool_name || '')), h('pre', {}, m.content)));
      }
    } catch (err) { chat.append(errorBox(err)); }
  };

  // turn holds what one streamed turn renders into.
  const newTurn = () => {
    const el = h('div', { class: 'msg assistant' });
    chat.append(el);
    return { el, text: null, thinking: null, cards: new Map() };
  };
  const cardOf = (turn, f) => {
    let c = turn.cards.get(f.tool_id);
    if (c) return c;
    const params = h('pre', {}, json(f.parameters || {}));
    const result = h('div', {});
    const children = h('div', { class: 'children' });
    const label = h('span', { class: 'muted' }, f.running_label || 'running…');
    const el = h('div', { class: 'tool', 'data-tool-id': f.tool_id || '', 'data-tool': f.tool_name || '' },
      h('strong', {}, f.tool_name || 'tool'), ' ', label, h('details', { open: true }, h('summary', {}, 'Parameters'), params), children, result);
    c = { el, params, result, children, label, f };
    turn.cards.set(f.tool_id, c);
    const parent = f.parent_tool_id && turn.cards.get(f.parent_tool_id);
    (parent ? parent.children : turn.el).append(el);
    turn.text = null;
    return c;
  };
  const onFrame = (turn, f) => {
    switch (f.type) {
      case 'init':
        sessionId = f.session_id; sessionIn.value = f.session_id; break;
      case 'text_delta':
        if (!turn.text) { turn.text = h('div', { class: 'text' }); turn.el.append(turn.text); }
        turn.text.append(f.content); break;
      case 'thinking_delta':
        if (!turn.thinking) { turn.thinking = h('pre', {}); turn.el.append(h('details', { class: 'thinking' }, h('summary', {}, 'Thinking'), turn.thinking)); }
        turn.thinking.append(f.content); break;
      case 'tool_call_start': cardOf(turn, f); break;
      case 'tool_label_update': { const c = turn.cards.get(f.tool_id); if (c && f.running_label) c.label.textContent = f.running_label; break; }
      case 'tool_log': { const c = [...turn.cards.values()].reverse().find((x) => x.f.tool_name === f.tool_name); (c ? c.result : turn.el).append(h('div', { class: 'muted mono' }, f.message)); break; }
      case 'tool_call_result': {
        const c = cardOf(turn, f);
        c.el.classList.add(f.status === 'success' ? 'success' : 'error');
        c.el.dataset.status = f.status;
        c.label.textContent = (f.status === 'success' ? (c.f.completed_label || 'done') : f.status) + ' in ' + (f.duration_ms ?? '?') + ' ms';
        const body = f.error || f.content || (f.result !== undefined ? json(f.result) : '');
        c.result.append(h('details', { open: true }, h('summary', {}, 'Result'), h('pre', { class: 'tool-result' }, body)));
        turn.text = null; break;
      }
      case 'subagent_event': {
        const parent = turn.cards.get(f.parent_tool_id);
        const line = h('div', { class: 'tool' }, h('strong', {}, f.agent_name + ' · ' + f.event_type), f.tool_name ? ' ' + f.tool_name : '',
          f.tool_args ? h('pre', {}, json(f.tool_args)) : '', f.text ? h('div', {}, f.text) : '', f.result !== undefined ? h('pre', {}, json(f.result)) : '', f.error ? h('div', { class: 'bad' }, f.error) : '');
        (parent ? parent.children : turn.el).append(line); break;
      }
      case 'widget':
        turn.el.append(h('div', { class: 'card widget', 'data-widget': f.widget_type }, h('strong', {}, 'Widget ' + f.widget_type), h('pre', {}, json(f.data)))); break;
      case 'confirmation_required': {
        const out = h('span', { class: 'muted' });
        const answer = async (approved) => {
          for (const b of box.querySelectorAll('button')) b.disabled = true;
          try { const r = await rt('POST', '/chat/sessions/' + encodeURIComponent(sessionId) + '/ask-user-response', { correlation_id: f.correlation_id, approved }); out.textContent = r.status; } catch (err) { out.replaceWith(errorBox(err)); }
        };
        const box = h('div', { class: 'approval', 'data-correlation': f.correlation_id },
          h('div', {}, h('strong', {}, 'Approve ' + f.tool_name + '?'), ' ', f.method + ' ' + f.endpoint, f.connection_name ? ' via ' + f.connection_name : ''),
          h('div', { class: 'muted' }, f.reason || '', f.escalated ? ' (escalated)' : ''), f.params ? h('pre', {}, json(f.params)) : '',
          h('div', { class: 'row' }, h('button', { class: 'primary', type: 'button', 'data-approve': 'yes', onclick: () => answer(true) }, 'Approve'),
            h('button', { class: 'danger', type: 'button', 'data-approve': 'no', onclick: () => answer(false) }, 'Deny'), out));
        const parent = f.tool_id && turn.cards.get(f.tool_id);
        (parent ? parent.el : turn.el).append(box);
        box.querySelector('button').focus();
        break;
      }
      case 'approved': case 'denied':
        turn.el.append(h('div', { class: f.type === 'approved' ? 'ok' : 'bad' }, f.type + (f.timeout ? ' (no answer in time)' : '') + ' ' + (f.preview_id || ''))); break;
      case 'ask_choice': {
        const picked = new Set();
        const box = h('div', { class: 'approval' }, h('strong', {}, f.question),
          h('div', { class: 'row' }, (f.options || []).map((o) => h('button', { type: 'button', 'data-choice': o.value, onclick: (e) => {
            if (f.multi) { e.target.classList.toggle('primary'); picked.has(o.value) ? picked.delete(o.value) : picked.add(o.value); return; }
            input.value = o.value; form.requestSubmit();
          } }, o.label || o.value)),
          f.multi ? h('button', { class: 'primary', type: 'button', onclick: () => { input.value = [...picked].join(', '); form.requestSubmit(); } }, 'Send choices') : ''));
        turn.el.append(box); break;
      }
      case 'durable_approval_required': {
        const out = h('div', {});
        const value = h('input', { placeholder: 'answer (text, or JSON)' });
        const submit = async (v) => {
          try { await rt('POST', '/api/sessions/' + encodeURIComponent(f.session_id) + '/answer', { value: v }); out.replaceChildren(h('p', { class: 'ok' }, 'Answered.')); } catch (err) { out.replaceChildren(errorBox(err)); }
        };
        const opts = f.options || [];
        turn.el.append(h('form', { class: 'approval durable', onsubmit: (e) => {
          e.preventDefault();
          let v = value.value.trim();
          if (!v) { out.replaceChildren(errorBox({ message: 'value: give an answer' })); return; }
          try { v = JSON.parse(v); } catch { /* a string */ }
          submit(v);
        } }, h('strong', {}, (f.question || 'The durable tool ' + f.tool_name + ' waits for an answer')),
        h('div', { class: 'row' }, opts.length ? opts.map((o) => h('button', { type: 'button', onclick: () => submit(o.value) }, (o.label || String(o.value)) + (o.recommended ? ' (recommended)' : '')))
          : [h('button', { type: 'button', onclick: () => submit(true) }, 'Approve'), h('button', { type: 'button', class: 'danger', onclick: () => submit(false) }, 'Reject')]),
        h('div', { class: 'row' }, value, h('button', { type: 'submit' }, 'Answer')), out));
        break;
      }
      case 'warning': turn.el.append(h('div', { class: 'warn-box' }, f.message)); break;
      case 'error': turn.el.append(h('div', { class: 'error-box' }, f.message)); break;
      case 'input_redacted': turn.el.append(h('div', { class: 'muted' }, 'Your message as the model sees it: ' + f.text)); break;
      case 'skill_activated': turn.el.append(h('div', { class: 'muted' }, 'Skill ' + f.skill_name)); break;
      case 'agent_handoff': turn.el.append(h('div', { class: 'muted' }, 'Handed off from ' + (f.from || 'default') + ' to ' + f.to)); break;
      case 'compaction_start': turn.el.append(h('div', { class: 'muted' }, 'Compacting the history…')); break;
      case 'compaction_end': turn.el.append(h('div', { class: 'muted' }, 'Compacted ' + f.tokens_before + ' → ' + f.tokens_after + ' tokens')); break;
      case 'done': {
        const u = f.usage || {};
        const tmpl = traceURL.value.trim();
        const trace = f.trace_id ? (tmpl ? h('a', { href: tmpl.replace('{trace_id}', f.trace_id), target: '_blank', rel: 'noopener noreferrer' }, 'trace ' + f.trace_id) : h('span', { class: 'mono' }, 'trace ' + f.trace_id)) : '';
        turn.el.append(h('div', { class: 'muted done', 'data-reason': f.reason }, 'done: ' + f.reason + ' · ' + (f.turns ?? '?') + ' model calls · tokens in ' + (u.input_tokens ?? 0) + ', out ' + (u.output_tokens ?? 0) + ', total ' + (u.total_tokens ?? 0) + ' ', trace));
        turn.done = true; break;
      }
      default: turn.el.append(h('div', { class: 'muted mono' }, f.type));
    }
  };
  const consume = async (resp, turn) => {
    await readSSE(resp, (ev) => {
      if (ev.id) lastId = ev.id;
      let f; try { f = JSON.parse(ev.data); } catch { return; }
      onFrame(turn, f);
    });
  };
  // reattach asks the runtime for the rest of the turn after lastId; false when it cannot.
  const reattach = async (turn) => {
    if (!sessionId) return false;
    try {
      const resp = await fetch(base() + '/chat/sessions/' + encodeURIComponent(sessionId) + '/stream', {
        headers: { 'Authorization': 'Bearer ' + (await bearer()), 'Last-Event-ID': lastId || '0' }, signal: ctl.signal });
      if (resp.status !== 200) return false;
      status.textContent = 'Reattached after a dropped connection.';
      await consume(resp, turn);
      return true;
    } catch { return false; }
  };
  const busy = (on) => { send.disabled = on; stop.disabled = !on; };

  const form = h('form', { id: 'pg-form', onsubmit: async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) { status.replaceChildren(errorBox({ message: 'message: type a message' })); return; }
    const body = { message: text };
    if (sessionIn.value.trim()) body.session_id = sessionIn.value.trim();
    try {
      if (context.value.trim()) body.context = JSON.parse(context.value);
    } catch (err) { status.replaceChildren(errorBox({ message: 'context: not a JSON object (' + err.message + ')' })); return; }
    try {
      if (metadata.value.trim()) body.metadata = JSON.parse(metadata.value);
    } catch (err) { status.replaceChildren(errorBox({ message: 'metadata: not a JSON object (' + err.message + ')' })); return; }
    if (provider.value) body.model = model.value.trim() ? { provider: provider.value, model: model.value.trim() } : { provider: provider.value };
    input.value = '';
    chat.append(h('div', { class: 'msg user' }, text));
    const turn = newTurn();
    ctl = new AbortController(); stopped = false; lastId = null;
    busy(true); status.textContent = 'Streaming…';
    try {
      const resp = await fetch(base() + '/chat/stream', { method: 'POST', signal: ctl.signal,
        headers: { 'Authorization': 'Bearer ' + (await bearer()), 'Content-Type': 'application/json', 'Accept': 'text/event-stream' }, body: JSON.stringify(body) });
      if (!resp.ok) {
        let msg = 'HTTP ' + resp.status;
        try { const d = await resp.json(); msg = (d.error && (d.error.message || d.error)) || d.message || msg; } catch { /* not JSON */ }
        throw new Error(msg);
      }
      await consume(resp, turn);
      if (!turn.done && !stopped && !(await reattach(turn))) turn.el.append(h('div', { class: 'error-box' }, 'The connection dropped before the turn ended.'));
      status.textContent = '';
    } catch (err) {
      if (stopped) status.textContent = 'Stopped.';
      else if (!(await reattach(turn))) { turn.el.append(h('div', { class: 'error-box' }, 'The connection dropped: ' + err.message)); status.textContent = ''; }
    } finally { busy(false); loadHistory(); }
  } },
  h('div', { class: 'row' }, h('label', { for: 'pg-target' }, 'Deployment'), target),
  input, h('div', { class: 'row' }, send, stop, h('button', { type: 'button', onclick: () => { sessionId = ''; sessionIn.value = ''; chat.replaceChildren(); } }, 'New session')),
  h('details', {}, h('summary', {}, 'Request: session, model, context, metadata, traces'),
    h('label', { for: 'pg-session' }, 'Session id'), sessionIn,
    h('div', { class: 'row' }, h('label', { for: 'pg-provider' }, 'Model provider'), provider, h('label', { for: 'pg-model' }, 'Model'), model),
    h('label', { for: 'pg-context' }, 'Context (JSON object of strings)'), context,
    h('label', { for: 'pg-metadata' }, 'Metadata (JSON object of strings)'), metadata,
    h('label', { for: 'pg-trace' }, 'Trace link template'), traceURL));
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); } });
  stop.addEventListener('click', async () => {
    stopped = true;
    try { await rt('POST', '/chat/sessions/' + encodeURIComponent(sessionId) + '/stop'); status.textContent = 'Stopping…'; } catch { if (ctl) ctl.abort(); }
  });
  target.addEventListener('change', () => { tok = null; loadHistory(); });
  setPage('Playground: ' + agent.name,
    h('div', { class: 'grid2' }, h('aside', {}, h('h2', {}, 'Sessions'), history), h('section', {}, chat, status, form)));
  loadHistory();
  input.focus();
}
