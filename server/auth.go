package server

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

// TokenAuthenticator checks bearer tokens against a static token file in
// kube-apiserver's --token-auth-file format. It is a k8s.io/apiserver
// authenticator.Token; wrap it with bearertoken.New to authenticate
// requests.
type TokenAuthenticator struct {
	// users is keyed by the SHA-256 of the token, so that lookups do not
	// compare secrets byte by byte.
	users map[[sha256.Size]byte]*user.DefaultInfo
}

var _ authenticator.Token = (*TokenAuthenticator)(nil)

// LoadTokenFile reads a token file: CSV lines of token, user name, user
// UID and optionally a quoted, comma-separated group list, e.g.
//
//	31ada4fd-adec-460c-809a-9e56ceb75269,alice,1001,"system:masters,dev"
func LoadTokenFile(path string) (*TokenAuthenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	a, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return a, nil
}

// ParseTokens reads token-file CSV from r.
func ParseTokens(r io.Reader) (*TokenAuthenticator, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	a := &TokenAuthenticator{users: map[[sha256.Size]byte]*user.DefaultInfo{}}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("record %d: need at least 3 columns (token, user name, user uid), found %d", line, len(rec))
		}
		if rec[0] == "" {
			return nil, fmt.Errorf("record %d: empty token", line)
		}
		u := &user.DefaultInfo{Name: rec[1], UID: rec[2]}
		if len(rec) > 3 && rec[3] != "" {
			for _, g := range strings.Split(rec[3], ",") {
				u.Groups = append(u.Groups, strings.TrimSpace(g))
			}
		}
		key := sha256.Sum256([]byte(rec[0]))
		if _, dup := a.users[key]; dup {
			return nil, fmt.Errorf("record %d: duplicate token", line)
		}
		a.users[key] = u
	}
	if len(a.users) == 0 {
		return nil, errors.New("no tokens")
	}
	return a, nil
}

// AuthenticateToken implements authenticator.Token: the user the token
// belongs to, if any. It returns a copy, so callers may add groups.
func (a *TokenAuthenticator) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	u, ok := a.users[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, false, nil
	}
	c := *u
	c.Groups = append([]string(nil), u.Groups...)
	return &authenticator.Response{User: &c}, true, nil
}
