// Package models calls the model APIs of the agent runtime behind one small interface.
//
// The agent loop needs exactly one thing from a model: stream an answer (text, reasoning,
// tool calls) for a conversation and report the tokens it cost. Provider is that one call,
// so the loop, compaction and the tests do not care which API is behind it.
//
// Implementations:
//   - OpenAI: Chat Completions, for "openai" and any "openai-compatible" server (vLLM,
//     Ollama, llama.cpp, DeepSeek, OpenRouter), whose reasoning deltas it also reads. It
//     speaks the wire format itself (request built with appends, chunks read by a decoder
//     made for their shape, encoding/json for anything unusual): through the official SDK,
//     encoding and decoding took about half the runtime's CPU per chat turn;
//   - Anthropic: the Messages API through the official SDK, with extended thinking;
//   - Echo: deterministic and offline, so that an agent can be tried without a key and the
//     runtime can be tested and benchmarked without a network.
//
// New picks one with an explicit switch. Both HTTP providers share one retry policy
// (retrier): 429, 5xx and connection failures are retried with backoff only while nothing
// was emitted yet, because a retried stream would repeat text the client already has. The
// Anthropic SDK's own retries are off: they start at 500 ms, retry other statuses and do not
// cover a stream that breaks before its first event. Failures end as *APIError, whose message
// never holds the API key.
//
// The fake servers of package modelstest speak the real wire formats, so the tests run the
// providers' HTTP code for real.
package models
