// Drives the AI SDK's own resume call: DefaultChatTransport.reconnectToStream, what
// useChat({resume: true}) runs on mount (GET `${api}/${chatId}/stream`, null on 204).
// Usage: node resume.mjs <api> <chatId>; prints {"null": true} or the chunks' types and text.
import { DefaultChatTransport } from "ai";

const [api, chatId] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api });
const stream = await transport.reconnectToStream({ chatId });
if (stream === null) {
  console.log(JSON.stringify({ null: true }));
} else {
  const types = [];
  let text = "";
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    types.push(value.type);
    if (value.type === "text-delta") text += value.delta;
  }
  console.log(JSON.stringify({ types, text }));
}
