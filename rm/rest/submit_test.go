package rest

import (
	"bytes"
	"testing"

	"github.com/knitdev/knit/protocols/token"
)

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
