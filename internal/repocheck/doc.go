// Package repocheck holds the tests that keep the repository's prose true:
// every test a comment or a doc names exists, and every file a doc names
// is there. It has no code of its own.
package repocheck
