// Package readme holds the test that keeps the repository's README.md
// true: it extracts the README's commands that start something (each
// `go run` in a sh block or an inline code span, with the flag variants
// the same paragraph names) and runs each, failing if one errors. The
// package has no code of its own; it is a test with a home.
package readme
