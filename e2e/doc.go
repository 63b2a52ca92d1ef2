// Package e2e holds Felix's end-to-end crash test (issue 11): the real felix-broker binary,
// a real corpus of files published through the SDK, SIGKILLs at random moments, and a
// final account of what was acknowledged, stored, delivered and verified on disk.
//
// Everything lives in the test files; run it with `make e2e` (CI size) or `make soak`
// (long run, writes docs/soak.md). docs/soak.md describes the checks and the knobs.
package e2e
