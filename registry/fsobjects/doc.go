// Package fsobjects implements registry.Objects on a local directory tree,
// for the embedded platform (`svc up`) and for tests that need no server.
//
// Each object is a regular file at its key's path under the root, so the
// store can be inspected, backed up and restored with ordinary tools. Put
// and Copy write a temporary file in the destination's own directory,
// fsync it, rename it over the destination and fsync the directory: rename
// within one directory is atomic on POSIX filesystems, which is what makes
// readers see the old or the whole new object and what lets a crash leave
// at most a stray temporary file, never a torn object. Temporary file names
// contain a backslash, which registry.ValidateKey forbids in keys, so they
// can never be mistaken for objects; List skips them.
//
// An open reader keeps the version it opened (the inode survives a rename
// or an unlink), so a Get that races a Put still reads one whole version.
//
// Limits: a key cannot be both an object and a directory of other objects
// ("a" and "a/b"); key segments longer than the filesystem's name limit
// (usually 255 bytes) fail with the filesystem's error; empty directories
// are left behind by Delete, because removing them would race with a Put
// that is about to write into them.
package fsobjects
