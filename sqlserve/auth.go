package sqlserve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// sessionTTL is how long a token issued by Handshake stays valid.
const sessionTTL = 12 * time.Hour

// maxSessions bounds the issued tokens kept; the oldest go first.
const maxSessions = 10_000

// Auth is the endpoint's authentication: a bearer token, basic auth, or
// both. The zero value accepts every call.
type Auth struct {
	// Token is accepted as "authorization: Bearer <Token>". "" accepts none.
	Token string
	// Username and Password are accepted as basic auth on any call, and
	// exchanged for a session token by the Flight Handshake (the JDBC
	// driver's way). "" accepts none.
	Username, Password string
}

func (a Auth) enabled() bool { return a.Token != "" || a.Username != "" }

// authenticator checks every call's "authorization" header. It is safe for
// concurrent use.
type authenticator struct {
	cfg Auth
	now func() time.Time

	mu       sync.Mutex           // protects sessions
	sessions map[string]time.Time // token issued by Handshake -> expiry
}

func newAuthenticator(a Auth, now func() time.Time) *authenticator {
	return &authenticator{cfg: a, now: now, sessions: map[string]time.Time{}}
}

var errUnauthenticated = status.Error(codes.Unauthenticated,
	"sqlserve: authentication required: a bearer token (authorization: Bearer ...) or basic auth (user and password)")

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// check validates md's credentials; basic reports whether they were a
// valid user and password.
func (au *authenticator) check(md metadata.MD) (basic bool, err error) {
	if !au.cfg.enabled() {
		return false, nil
	}
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return false, errUnauthenticated
	}
	scheme, cred, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
	cred = strings.TrimSpace(cred)
	switch {
	case strings.EqualFold(scheme, "Bearer") && cred != "":
		if au.cfg.Token != "" && equal(cred, au.cfg.Token) {
			return false, nil
		}
		au.mu.Lock()
		exp, ok := au.sessions[cred]
		au.mu.Unlock()
		if ok && au.now().Before(exp) {
			return false, nil
		}
	case strings.EqualFold(scheme, "Basic") && au.cfg.Username != "":
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			raw, err = base64.RawStdEncoding.DecodeString(cred)
		}
		if err == nil {
			user, pass, _ := strings.Cut(string(raw), ":")
			// Both compared, so the time does not tell which was wrong.
			if u, p := equal(user, au.cfg.Username), equal(pass, au.cfg.Password); u && p {
				return true, nil
			}
		}
	}
	return false, status.Error(codes.Unauthenticated, "sqlserve: invalid credentials")
}

// issue returns a new session token for a client that passed basic auth.
func (au *authenticator) issue() string {
	var b [24]byte
	rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	now := au.now()
	au.mu.Lock()
	defer au.mu.Unlock()
	if len(au.sessions) >= maxSessions {
		for k, exp := range au.sessions {
			if !now.Before(exp) || len(au.sessions) >= maxSessions {
				delete(au.sessions, k)
			}
		}
	}
	au.sessions[tok] = now.Add(sessionTTL)
	return tok
}

func (au *authenticator) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo,
	handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if _, err := au.check(md); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (au *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo,
	handler grpc.StreamHandler) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	basic, err := au.check(md)
	if err != nil {
		return err
	}
	// Handshake with basic auth answers a session token in the
	// "authorization" header, as Arrow's Java (JDBC) client expects.
	if basic && strings.HasSuffix(info.FullMethod, "/Handshake") {
		if err := ss.SetHeader(metadata.Pairs("authorization", "Bearer "+au.issue())); err != nil {
			return err
		}
	}
	return handler(srv, ss)
}
