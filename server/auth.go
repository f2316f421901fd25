package server

import (
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// User is an authenticated client.
type User struct {
	Name   string
	UID    string
	Groups []string
}

// TokenAuthenticator checks bearer tokens against a static token file in
// kube-apiserver's --token-auth-file format.
type TokenAuthenticator struct {
	// users is keyed by the SHA-256 of the token, so that lookups do not
	// compare secrets byte by byte.
	users map[[sha256.Size]byte]User
}

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
	a := &TokenAuthenticator{users: map[[sha256.Size]byte]User{}}
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
		u := User{Name: rec[1], UID: rec[2]}
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

// Authenticate returns the user a request's bearer token belongs to.
func (a *TokenAuthenticator) Authenticate(r *http.Request) (User, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return User{}, false
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return User{}, false
	}
	u, ok := a.users[sha256.Sum256([]byte(token))]
	return u, ok
}
