// Command svcbench drives load against an agent runtime and measures it (issue 5's benchmark).
//
// It starts nothing but, optionally, an in-process fake OpenAI server; the runtime under test
// (`svc dev` on the hello fixture, pointed at the fake with OPENAI_BASE_URL) runs as its own
// process, so that its CPU time and memory can be read from /proc without the load tool's.
//
//	svcbench -fake-openai 127.0.0.1:9999 [-chunks 32] [-hold]      # serve the fake model until interrupted
//	svcbench -fake-openai 127.0.0.1:9999 -fake-tls cert.pem [-hold]  # the same over TLS with HTTP/2 (runtime: SSL_CERT_FILE=cert.pem)
//	svcbench -url http://127.0.0.1:3847 -c 64 -d 10s [-pid PID]    # turns/s, time to first text_delta, CPU per turn
//	svcbench -url ... -idle-sessions 10000 -pid PID                 # resident memory per idle session
//	svcbench -url ... -open-streams 2000 -pid PID                   # resident memory with streams open (fake with -hold)
package main
