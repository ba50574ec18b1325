package rest

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// decodeSubmission reads a submission body as the submit handler does,
// the caller aside.
func decodeSubmission(contentType string, body []byte) (*yarnpb.ApplicationSubmissionContextProto, error) {
	var in submissionContext
	if err := DecodeBody(contentType, SubmissionRoot, body, &in); err != nil {
		return nil, err
	}
	return submissionProto(in)
}

// A submission's credentials reach the AM's launch context as
// RMWebAppUtil.createCredentials makes them: each token decoded from its
// URL-safe form, each secret from base64, written as a token storage
// stream.
func TestASubmissionsCredentialsReachTheLaunchContext(t *testing.T) {
	body := `{"application-id":"application_1795333013199_0004","am-container-spec":{"credentials":{` +
		`"tokens":{"entry":[{"key":"hdfs","value":"` + hdfsToken + `"}]},` +
		`"secrets":{"entry":[{"key":"padded","value":"c2VjcmV0MQ=="},{"key":"bare","value":"c2VjcmV0MQ"}]}}}}`
	sc, err := decodeSubmission("application/json", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := token.ParseCredentials(sc.GetAmContainerSpec().GetTokens())
	if err != nil {
		t.Fatal(err)
	}
	want := token.Token{Identifier: []byte("alice-id"), Password: []byte("pw"), Kind: "HDFS_DELEGATION_TOKEN", Service: "ha-hdfs:nn"}
	if got, ok := creds.Token("hdfs"); !ok || !got.Equal(want) || creds.NumTokens() != 1 {
		t.Errorf("token %v (%v), %d tokens; want %v", got, ok, creds.NumTokens(), want)
	}
	for _, alias := range []string{"padded", "bare"} {
		if got, ok := creds.Secret(alias); !ok || string(got) != "secret1" {
			t.Errorf("secret %s = %q (%v), want secret1", alias, got, ok)
		}
	}
	// None given, none written: the launch context is the client's.
	sc, err = decodeSubmission("", []byte(`{"application-id":"application_1795333013199_0004","am-container-spec":{}}`))
	if err != nil || sc.GetAmContainerSpec().Tokens != nil {
		t.Errorf("tokens %v (%v) for a spec without credentials", sc.GetAmContainerSpec().GetTokens(), err)
	}
}

// commons-codec's decoder, which RMWebAppUtil uses, reads either alphabet,
// with or without padding, skips what is not base64 and never fails.
func TestBase64IsReadAsCommonsCodecReadsIt(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"dmFsdWUxMg==", "value12"},
		{"dmFsdWUxMg", "value12"},
		{"dmFs\ndWUx Mg", "value12"},
		{"-_8", "\xfb\xff"},
		{"+/8=", "\xfb\xff"},
		{"dmFsdWUxMg==ignored", "value12"},
		{"dmFsd", "val"},
		{"", ""},
		{"!!!", ""},
	} {
		if got := decodeBase64(tc.in); !bytes.Equal(got, []byte(tc.want)) {
			t.Errorf("decodeBase64(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Token.readFields of a token cut short throws an EOFException, whose
// message Java prints as null.
func TestATokenCutShortIsRefusedWithJavasMessage(t *testing.T) {
	body := `{"application-id":"application_1795333013199_0004","am-container-spec":{"credentials":{"tokens":{"entry":{"key":"hdfs","value":"AAAA"}}}}}`
	_, err := decodeSubmission("application/json", []byte(body))
	var re *remoteException
	if !errors.As(err, &re) || re.Message != "java.lang.Exception: Could not parse credentials data; exception message = null" {
		t.Errorf("error %v, want Hadoop's BadRequestException", err)
	}
}

// Jersey reads a write's entity before its resource method asks for the
// caller: a body it cannot read is a 400 even without a user.
func TestAnUnreadableBodyIsRefusedBeforeTheCaller(t *testing.T) {
	h := newServer(t, newFake(t), func(c *Config) { c.RequireUser = true })
	for _, tc := range []struct{ method, target string }{
		{"POST", "/ws/v1/cluster/apps"},
		{"PUT", app3 + "/state"},
		{"PUT", app3 + "/queue"},
		{"PUT", app3 + "/priority"},
		{"PUT", app3 + "/timeout"},
	} {
		for _, body := range []struct{ contentType, text string }{{"application/json", "{"}, {"application/xml", "<x"}} {
			if w := serveAs(t, h, tc.method, tc.target, body.contentType, "", body.text); w.Code != http.StatusBadRequest {
				t.Errorf("%s %s %s without a user: %d %s, want 400", tc.method, tc.target, body.contentType, w.Code, w.Body)
			}
		}
		if w := serveAs(t, h, tc.method, tc.target, "application/json", "", "{}"); w.Code != http.StatusUnauthorized {
			t.Errorf("%s %s with a body and no user: %d %s, want 401", tc.method, tc.target, w.Code, w.Body)
		}
	}
}
