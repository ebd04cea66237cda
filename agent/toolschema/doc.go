// Package toolschema compiles the JSON Schema of a tool's parameters and checks a call's
// arguments against it, naming the field of every problem ("subject: required").
//
// Why a package of its own: the same compiler must decide what a valid parameter schema is at
// build time (package agent refuses a tool.json whose schema does not compile) and check every
// call at run time (runner/tools); if the two differed, a tree the build accepted could fail
// every call. It sits under agent because agent may import no other folder of svc.
//
// Why the loader is locked: a tool.json is written by whoever pushes to the agent's repository,
// and the library follows file:// (and, with a loader, http) $refs by default. Compile resolves
// nothing outside the schema itself: a $ref or $schema that points elsewhere is an error, and
// only the JSON Schema meta-schemas built into the library are known. Compile also reports every
// $ref that leaves the schema with its place, so that the build can say where it is.
package toolschema
