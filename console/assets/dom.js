// Small DOM helpers: h builds elements (text is always set as text, never as HTML).

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function age(iso) {
  if (!iso) return '';
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return Math.floor(s) + 's ago';
  if (s < 3600) return Math.floor(s / 60) + 'm ago';
  if (s < 86400) return Math.floor(s / 3600) + 'h ago';
  return Math.floor(s / 86400) + 'd ago';
}

export function badge(text, extra) {
  return h('span', { class: 'badge ' + (text || '') + (extra ? ' ' + extra : '') }, text || '—');
}

export function json(v) { return JSON.stringify(v, null, 2); }

export function toast(msg) {
  const box = document.getElementById('toast');
  const el = h('div', {}, msg);
  box.append(el);
  setTimeout(() => el.remove(), 5000);
}

export function errorBox(err) {
  const code = err && err.code ? err.code + ': ' : '';
  return h('div', { class: 'error-box', role: 'alert' }, code + (err && err.message ? err.message : String(err)));
}

// confirmAction asks in the page's dialog and resolves true when confirmed.
export function confirmAction(text, okLabel) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = okLabel || 'Confirm';
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
    dlg.returnValue = '';
    dlg.showModal();
    document.getElementById('confirm-ok').focus();
  });
}
