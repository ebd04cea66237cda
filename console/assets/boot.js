// The shell's first script, a classic one that runs as soon as the parser reaches it: it starts
// the GET calls of the page being opened, so that they run while the browser loads and compiles
// the modules, and api.js takes their answers instead of asking again (api.early). The paths
// must be the very ones the page asks for: the browser tests check that no call is made twice.
(() => {
  const token = sessionStorage.getItem('svc.console.token');
  if (!token) return;
  const path = location.pathname.replace(/\/+$/, '');
  const paths = ['/api/tokens/self'];
  let m;
  if (path === '/console' || path === '/console/agents') paths.push('/api/agents');
  else if ((m = path.match(/^\/console\/agents\/([^/]+)$/))) paths.push(...agentPageCalls(m[1]));
  const calls = {};
  for (const p of paths) calls[p] = fetch(p, { headers: { Authorization: 'Bearer ' + token } });
  window.svcEarly = { token, calls };

  // agentPageCalls are the first calls of an agent's page (app.js renderAgent).
  function agentPageCalls(id) {
    const base = '/api/agents/' + id;
    return [base, base + '/deployments?active=true&limit=500', base + '/deployments?limit=20'];
  }
})();
