package access

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("t-root,root,0,system:masters\nt-bob,bob,2,dev\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The default: nobody authenticated, everything allowed.
	b, err := Build(Options{})
	if err != nil || b.Authenticator != nil || b.Authorizer != nil || strings.Join(b.Modes, ",") != ModeAlwaysAllow {
		t.Errorf("default: %+v %v", b, err)
	}

	// Tokens authenticate users into system:authenticated.
	b, err = Build(Options{TokenAuthFile: tokens, AuthorizationModes: []string{ModeAlwaysDeny}})
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]user.Info{}
	for _, tok := range []string{"t-root", "t-bob"} {
		r, _ := http.NewRequest(http.MethodGet, "http://eventsd/api", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		resp, ok, err := b.Authenticator.AuthenticateRequest(r)
		if !ok || err != nil {
			t.Fatalf("token %s: %v %v", tok, ok, err)
		}
		users[tok] = resp.User
	}
	if u := users["t-bob"]; u.GetName() != "bob" || u.GetUID() != "2" || strings.Join(u.GetGroups(), ",") != "dev,system:authenticated" {
		t.Errorf("bob: %+v", u)
	}
	// AlwaysDeny does not allow bob (no opinion, "Everything is forbidden.");
	// system:masters is allowed before any mode.
	for tok, want := range map[string]authorizer.Decision{"t-root": authorizer.DecisionAllow, "t-bob": authorizer.DecisionNoOpinion} {
		d, _, err := b.Authorizer.Authorize(context.Background(), authorizer.AttributesRecord{User: users[tok], Verb: "list", Resource: "events", ResourceRequest: true})
		if d != want || err != nil {
			t.Errorf("%s under AlwaysDeny: %v %v, want %v", tok, d, err, want)
		}
	}

	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{AuthorizationModes: []string{ModeAlwaysDeny}}, "needs authentication"},
		{Options{TokenAuthFile: tokens, AuthorizationModes: []string{"Magic"}}, `unknown mode "Magic"`},
		{Options{TokenAuthFile: tokens, AuthorizationModes: []string{ModeWebhook}, AuthzWebhookConfigFile: filepath.Join(dir, "missing")}, "--authorization-webhook-config-file"},
		{Options{TokenAuthFile: tokens, AuthzWebhookConfigFile: "x"}, "needs --authorization-mode to include Webhook"},
		{Options{TokenWebhookConfigFile: filepath.Join(dir, "missing")}, "--authentication-token-webhook-config-file"},
		{Options{TokenAuthFile: filepath.Join(dir, "missing")}, "token file"},
	} {
		if _, err := Build(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build(%+v): %v, want an error containing %q", c.o, err, c.want)
		}
	}
}

// TestBadTokenIsRejectionNotError: a token nobody accepts is not ok
// without an error (bearertoken alone reports "invalid bearer token"),
// so the server counts and logs it apart from authenticator failures;
// a failing authenticator's error comes through.
func TestBadTokenIsRejectionNotError(t *testing.T) {
	failing := authenticator.TokenFunc(func(context.Context, string) (*authenticator.Response, bool, error) {
		return nil, false, errors.New("webhook down")
	})
	refusing := authenticator.TokenFunc(func(context.Context, string) (*authenticator.Response, bool, error) {
		return nil, false, nil
	})
	for name, c := range map[string]struct {
		tok     authenticator.Token
		wantErr string
	}{"refusing": {refusing, ""}, "failing": {failing, "webhook down"}} {
		a := bearerRequest{bearertoken.New(recordingToken{c.tok})}
		r, _ := http.NewRequest(http.MethodGet, "http://eventsd/api", nil)
		r.Header.Set("Authorization", "Bearer x")
		_, ok, err := a.AuthenticateRequest(r)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if ok || gotErr != c.wantErr {
			t.Errorf("%s: ok %v, err %v, want not ok and error %q", name, ok, err, c.wantErr)
		}
	}
}
