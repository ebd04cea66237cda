// Package modelstest runs fake model APIs for tests: httptest servers on 127.0.0.1 that speak
// the real streaming wire formats of OpenAI Chat Completions and Anthropic Messages.
//
// The providers of package models speak these formats (OpenAI directly, Anthropic through its
// official SDK); the bugs worth catching are in how chunks are decoded and assembled (tool call
// arguments split across chunks, usage arriving last, errors before and inside a stream). A
// fake at the HTTP level runs all of that for real, where a mock of the Provider interface
// would test nothing. A script of Turns says what each request gets, HTTP error statuses
// included, so retry and cancellation paths are testable without timing assertions.
// NewOpenAIBenchServer serves a precomputed stream so that benchmarks measure the client, not
// the fake.
package modelstest
