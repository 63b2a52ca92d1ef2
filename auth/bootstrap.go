package auth

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"felix/clock"
)

// Single-node day-0 defaults (docs/auth.md, "Bootstrap").
const (
	// DefaultTenant is the tenant Bootstrap creates on first start.
	DefaultTenant = "default"
	// DefaultNamespace is the namespace the broker's catalog creates in DefaultTenant on
	// first start (BootstrapResult.FirstStart).
	DefaultNamespace = "default"
	// AdminSubject is the sub of the bootstrap admin token.
	AdminSubject = "admin"
	// AdminTokenFile is the admin token's file name inside the data dir.
	AdminTokenFile = "admin.token"
	// DefaultAdminTokenTTL is the admin token's lifetime (365 days).
	DefaultAdminTokenTTL = 365 * 24 * time.Hour
)

// DisabledFromEnv interprets the FELIX_AUTH setting: "" or "on" → false (auth enforced,
// the secure default); "off" → true (FELIX_AUTH=off, everything allowed). Case-insensitive.
// Errors: ErrInvalidSetting for any other value, so a typo never switches auth off.
func DisabledFromEnv(value string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "on":
		return false, nil
	case "off":
		return true, nil
	}
	return false, fmt.Errorf("auth: FELIX_AUTH=%q (want on or off): %w", value, ErrInvalidSetting)
}

// BootstrapOptions configure Bootstrap. Zero seams mean OSFS{}, clock.Real(), crypto/rand.
type BootstrapOptions struct {
	// DataDir is the broker's data directory; keys go to <DataDir>/auth/keys.json and the
	// admin token to <DataDir>/admin.token.
	DataDir string
	// Disabled selects FELIX_AUTH=off: nothing is read or written and every check passes.
	Disabled bool
	// Logger receives the token path (info) or the disabled warning; nil means slog.Default().
	Logger *slog.Logger
	// AdminTokenTTL is the admin token lifetime; 0 means DefaultAdminTokenTTL.
	AdminTokenTTL time.Duration
	// CacheEntries is passed to the verifier (VerifierOptions.CacheEntries).
	CacheEntries int

	FS FS
	// Clock is the time of key creation, token issue and verification (nil: clock.Real()).
	Clock clock.Clock
	Rand  io.Reader
}

// BootstrapResult is what a single node needs to enforce auth.
type BootstrapResult struct {
	// Verifier checks client tokens: a *TokenVerifier, or DisabledVerifier{} when disabled.
	Verifier Verifier
	// Keys and Issuer are nil when disabled.
	Keys   *KeyStore
	Issuer *TokenIssuer
	// AdminTokenPath is <DataDir>/admin.token ("" when disabled).
	AdminTokenPath string
	// FirstStart is true when this call created DefaultTenant: the broker then creates
	// DefaultNamespace in its catalog.
	FirstStart bool
	// TokenWritten is true when this call (re)wrote the admin token file.
	TokenWritten bool
	// Disabled echoes BootstrapOptions.Disabled.
	Disabled bool
}

// Bootstrap prepares auth for a single node (issue 9, "secure by default"):
//
//   - Disabled: logs a warning (every start) and returns DisabledVerifier{}.
//   - Otherwise opens the key store; when it holds no tenant, creates DefaultTenant with a
//     signing key (FirstStart). When <DataDir>/admin.token is missing or no longer verifies
//     (expired, key removed, damaged) it writes a fresh admin token — AdminPermissions of
//     DefaultTenant, subject AdminSubject, AdminTokenTTL — with mode 0600 via temp+rename,
//     and logs the path. A valid token file is left alone, so restarts are idempotent.
//
// Errors: key store and file errors (wrapped), ErrCorruptKeyStore.
func Bootstrap(opts BootstrapOptions) (*BootstrapResult, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if opts.Disabled {
		logger.Warn("auth disabled (FELIX_AUTH=off): every client may do everything in every tenant; do not run this way outside local experiments")
		return &BootstrapResult{Verifier: DisabledVerifier{}, Disabled: true}, nil
	}
	if opts.DataDir == "" {
		return nil, errors.New("auth: bootstrap needs a data directory")
	}
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	if opts.AdminTokenTTL == 0 {
		opts.AdminTokenTTL = DefaultAdminTokenTTL
	}
	keys, err := OpenKeyStore(opts.DataDir, KeyStoreOptions{FS: opts.FS, Clock: opts.Clock, Rand: opts.Rand})
	if err != nil {
		return nil, err
	}
	result := &BootstrapResult{
		Keys:           keys,
		Issuer:         NewIssuer(keys, opts.Clock, opts.Rand),
		AdminTokenPath: filepath.Join(opts.DataDir, AdminTokenFile),
	}
	verifier := NewVerifier(VerifierOptions{Keys: keys, Clock: opts.Clock, CacheEntries: opts.CacheEntries})
	result.Verifier = verifier
	if len(keys.Tenants()) == 0 {
		if _, err := keys.CreateTenant(DefaultTenant); err != nil {
			return nil, err
		}
		result.FirstStart = true
		logger.Info("auth: created tenant", "tenant", DefaultTenant, "keys", KeyStorePath(opts.DataDir))
	}
	if !keys.HasTenant(DefaultTenant) {
		return result, nil // an operator-managed store without the default tenant: no admin token
	}
	written, err := ensureAdminToken(opts.FS, result, verifier, opts.AdminTokenTTL)
	if err != nil {
		return nil, err
	}
	result.TokenWritten = written
	if written {
		logger.Info("auth: admin token written (mode 0600); pass it as FELIX_AUTH_TOKEN with FELIX_AUTH_TENANT="+DefaultTenant,
			"path", result.AdminTokenPath, "tenant", DefaultTenant, "ttl", opts.AdminTokenTTL.String())
	} else {
		logger.Info("auth: admin token present", "path", result.AdminTokenPath)
	}
	return result, nil
}

// ensureAdminToken keeps a verifying admin token at result.AdminTokenPath and reports
// whether it wrote one.
func ensureAdminToken(fsys FS, result *BootstrapResult, verifier *TokenVerifier, ttl time.Duration) (bool, error) {
	data, err := readThrough(fsys, result.AdminTokenPath)
	switch {
	case err == nil:
		p, verr := verifier.verify(strings.TrimSpace(string(data)))
		if verr == nil && p.Tenant == DefaultTenant {
			return false, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("auth: read %s: %w", result.AdminTokenPath, err)
	}
	token, err := result.Issuer.Issue(DefaultTenant, AdminSubject, AdminPermissions(DefaultTenant), ttl)
	if err != nil {
		return false, err
	}
	if err := writeFileAtomic(fsys, result.AdminTokenPath, []byte(token+"\n"), 0o600); err != nil {
		return false, fmt.Errorf("auth: write %s: %w", result.AdminTokenPath, err)
	}
	return true, nil
}

// IssueToken is the `felix token issue` entry point: it opens the key store under dataDir
// (read-only use; nothing is written) and signs a token with tenant's active key. See
// TokenIssuer.Issue for the checks and errors.
func IssueToken(dataDir, tenant, subject string, perms []string, ttl time.Duration) (string, error) {
	keys, err := OpenKeyStore(dataDir, KeyStoreOptions{})
	if err != nil {
		return "", err
	}
	return NewIssuer(keys, nil, nil).Issue(tenant, subject, perms, ttl)
}
