package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"felix/auth"
	"felix/seglog"
)

// Exit codes of the felix command (docs/cli.md, "Exit codes"). Scripts tell failure kinds
// apart by these numbers; they never change meaning.
const (
	ExitOK            = 0 // success
	ExitFailure       = 1 // any failure not listed below
	ExitUsage         = 2 // bad command line: unknown command or flag, wrong arguments
	ExitNotFound      = 3 // the stream, cache, key or tenant does not exist
	ExitUnauthorized  = 4 // no usable credential, or the credential lacks a permission
	ExitIndeterminate = 5 // the outcome is unknown (the answer was lost after the request was sent)
	ExitUnavailable   = 6 // the broker is overloaded, unreachable or not ready: retry later
	ExitCorrupt       = 7 // felix log verify found damage
	// ExitStorageFailed: the broker answered storage_failed (its disk failed, or a read
	// met damage in a shard's log: `felix sub` stops there) or the admin API HTTP 500
	// storage_failed; `felix log repair` could not write. Issue 23.
	ExitStorageFailed = 8
)

// Failure-kind sentinels. Every command error wraps exactly one of them (or none, for
// ExitFailure); exitCode maps them to the exit codes above with errors.Is.
var (
	ErrUsage         = errors.New("usage")
	ErrNotFound      = errors.New("not found")
	ErrUnauthorized  = errors.New("unauthorized")
	ErrIndeterminate = errors.New("indeterminate")
	ErrUnavailable   = errors.New("unavailable")
	ErrCorrupt       = errors.New("verification failed")
	ErrStorageFailed = errors.New("storage failed")
)

// kindError attaches a failure kind to an error without changing its text.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }

// Unwrap exposes both the failure kind and the cause to errors.Is / errors.As.
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// withKind wraps err with the failure kind (nil stays nil).
func withKind(kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err}
}

// usagef is a usage error (exit 2) with a formatted message.
func usagef(format string, args ...any) error {
	return withKind(ErrUsage, fmt.Errorf(format, args...))
}

// exitCode returns the exit code for err: the CLI's own kinds first, then errors of
// the packages the CLI calls (auth, seglog, the network).
func exitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrCorrupt), errors.Is(err, seglog.ErrCorruption):
		return ExitCorrupt
	case errors.Is(err, ErrNotFound), errors.Is(err, auth.ErrUnknownTenant), errors.Is(err, os.ErrNotExist):
		return ExitNotFound
	case errors.Is(err, ErrUnauthorized), errors.Is(err, auth.ErrUnauthorized),
		errors.Is(err, auth.ErrForbidden), errors.Is(err, auth.ErrTenantMismatch):
		return ExitUnauthorized
	case errors.Is(err, ErrIndeterminate):
		return ExitIndeterminate
	case errors.Is(err, ErrStorageFailed):
		return ExitStorageFailed
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return ExitUnavailable
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return ExitUnavailable
	}
	return ExitFailure
}
