package amrmproxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/eventually"
)

// clock is a settable time for the key schedule.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestNewSecretsRefusesARollIntervalUnderTwiceTheActivationDelay(t *testing.T) {
	if _, err := NewSecrets(SecretsConfig{RollInterval: 2 * time.Minute, ActivationDelay: time.Minute}); err == nil {
		t.Fatal("NewSecrets accepted a roll interval of twice the activation delay")
	}
}

func TestSecretsRetrievePassword(t *testing.T) {
	other := yarnid.AttemptID{App: testAttempt.App, ID: 2}
	tests := []struct {
		name string
		// setup runs on fresh secrets and returns the identifier presented.
		setup   func(s *Secrets, c *clock) []byte
		wantErr bool
	}{
		{"a token just created is valid", func(s *Secrets, _ *clock) []byte { return s.Create(testAttempt).Identifier }, false},
		{"a token of a forgotten attempt is refused", func(s *Secrets, _ *clock) []byte {
			id := s.Create(testAttempt).Identifier
			s.Forget(testAttempt)
			return id
		}, true},
		{"a token the node never signed for the attempt is refused", func(s *Secrets, _ *clock) []byte {
			s.Create(testAttempt)
			b, _ := proto.Marshal(&yarnpb.AMRMTokenIdentifierProto{AppAttemptId: other.Proto(), KeyId: proto.Int32(s.current.id)})
			return b
		}, true},
		{"a token under the current key stays valid during a roll", func(s *Secrets, _ *clock) []byte {
			id := s.Create(testAttempt).Identifier
			mustRoll(t, s)
			return id
		}, false},
		{"a token under the next key is valid before activation", func(s *Secrets, _ *clock) []byte {
			mustRoll(t, s)
			return s.Create(testAttempt).Identifier
		}, false},
		{"a token under a replaced key is refused after activation", func(s *Secrets, c *clock) []byte {
			id := s.Create(testAttempt).Identifier
			mustRoll(t, s)
			c.now = c.now.Add(time.Minute)
			s.Activate()
			return id
		}, true},
		{"activation waits for its delay", func(s *Secrets, c *clock) []byte {
			id := s.Create(testAttempt).Identifier
			mustRoll(t, s)
			c.now = c.now.Add(time.Second)
			s.Activate()
			return id
		}, false},
		{"bytes that are no identifier are refused", func(*Secrets, *clock) []byte { return []byte{0xff, 0xff} }, true},
		{"an identifier without an attempt is refused", func(*Secrets, *clock) []byte { return nil }, true},
		{"an identifier over the size limit is refused", func(*Secrets, *clock) []byte { return make([]byte, maxIdentifierBytes+1) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{now: time.Unix(1700000000, 0)}
			s, err := NewSecrets(SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute, Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			id := tt.setup(s, c)
			_, pw, err := s.RetrievePassword(id)
			if tt.wantErr {
				if !errors.Is(err, yarnerr.InvalidToken) {
					t.Fatalf("RetrievePassword = %v, want InvalidToken", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("RetrievePassword: %v", err)
			}
			if len(pw) != 20 {
				t.Fatalf("password of %d bytes, want an HMAC-SHA1", len(pw))
			}
		})
	}
}

func TestSecretsCreateSignsWhatRetrievePasswordReturns(t *testing.T) {
	s := testSecrets(t)
	tok := s.Create(testAttempt)
	_, pw, err := s.RetrievePassword(tok.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	if string(pw) != string(tok.Password) || tok.Kind != client.KindAMRMToken || tok.Service != "" {
		t.Fatalf("token %v does not verify (password %x)", tok, pw)
	}
	var id yarnpb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(tok.Identifier, &id); err != nil {
		t.Fatal(err)
	}
	if got, _ := yarnid.AttemptIDFromProto(id.GetAppAttemptId()); got != testAttempt {
		t.Fatalf("identifier names %v, want %v", got, testAttempt)
	}
}

func TestSecretsRefresh(t *testing.T) {
	tests := []struct {
		name  string
		roll  bool
		again bool // present the refreshed token
		want  bool
	}{
		{"no new token without a roll", false, false, false},
		{"a new token under the next key after a roll", true, false, true},
		{"no new token for a token already under the next key", true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSecrets(t)
			id := identifier(t, s.Create(testAttempt).Identifier)
			if tt.roll {
				mustRoll(t, s)
			}
			if tt.again {
				tok, ok := s.Refresh(id)
				if !ok {
					t.Fatal("no refresh after a roll")
				}
				id = identifier(t, tok.Identifier)
			}
			tok, ok := s.Refresh(id)
			if ok != tt.want {
				t.Fatalf("Refresh ok = %v, want %v", ok, tt.want)
			}
			if ok && identifier(t, tok.Identifier).GetKeyId() != s.next.id {
				t.Fatalf("refreshed token under key %d, want the next key %d", identifier(t, tok.Identifier).GetKeyId(), s.next.id)
			}
		})
	}
}

func mustRoll(t *testing.T, s *Secrets) {
	t.Helper()
	if err := s.Roll(); err != nil {
		t.Fatal(err)
	}
}

func identifier(t *testing.T, b []byte) *yarnpb.AMRMTokenIdentifierProto {
	t.Helper()
	var id yarnpb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(b, &id); err != nil {
		t.Fatal(err)
	}
	return &id
}

func FuzzRetrievePassword(f *testing.F) {
	s, err := NewSecrets(SecretsConfig{RollInterval: time.Hour, ActivationDelay: time.Minute})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s.Create(testAttempt).Identifier)
	f.Add([]byte{0x0a, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, pw, err := s.RetrievePassword(b)
		if err != nil {
			if !errors.Is(err, yarnerr.InvalidToken) {
				t.Fatalf("error %v is not InvalidToken", err)
			}
			return
		}
		if id == nil || len(pw) != 20 {
			t.Fatalf("accepted %x without an identity and password", b)
		}
	})
}

func TestSecretsRunRollsAndActivatesKeysUntilItsContextEnds(t *testing.T) {
	s, err := NewSecrets(SecretsConfig{RollInterval: 50 * time.Millisecond, ActivationDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first := s.Create(testAttempt)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	eventually.Within(t, 10*time.Second, func(context.Context) error {
		if _, _, err := s.RetrievePassword(first.Identifier); err == nil {
			return errors.New("the first key still verifies")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if _, _, err := s.RetrievePassword(s.Create(testAttempt).Identifier); err != nil {
		t.Fatalf("a token under the rolled keys: %v", err)
	}
}
