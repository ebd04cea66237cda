// Package console is the operator's console of CONTRACT §13: a single-page application served by
// the platform at /console, its files embedded in the binary (go:embed), so that no Node, build
// server or network is needed at run time and the page works offline.
//
// The console is a client of the platform API like any other: the page holds a pk_ token in the
// browser's session storage and sends it as a bearer header on every call; this package never
// reads the database, the registry or the API's internals (the arch test keeps it so). It serves
// static files only, with the security headers that let the page load nothing but its own files
// and talk to nothing but the platform and the agents' hosts (for the playground).
//
// The front end is plain HTML, CSS and JavaScript ES modules with no build step: the browser loads
// the modules as they are written, so there is no generated output to keep current and nothing to
// compile. See the README's "Console" section.
package console
