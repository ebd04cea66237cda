// Server-sent events read from a fetch body (EventSource cannot send a bearer header or POST):
// the body is split on empty lines; each event's "id:" and "data:" lines are collected, ":"
// comment lines ignored.

export function sseParser(onEvent) {
  let buf = '';
  return (chunk) => {
    buf += chunk.replace(/\r\n/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let id = null; const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let value = c < 0 ? '' : line.slice(c + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'id') id = value;
        else if (field === 'data') data.push(value);
      }
      if (data.length) onEvent({ id, data: data.join('\n') });
    }
  };
}

// readSSE reads resp's body through the parser until it ends.
export async function readSSE(resp, onEvent) {
  const parse = sseParser(onEvent);
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parse(dec.decode(value, { stream: true }));
  }
}
