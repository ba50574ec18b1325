package logs

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// Hadoop's pseudo authentication (AuthenticationFilter with the simple
// handler), as the stock clients use it: a request naming user.name is
// that user and gets a signed hadoop.auth cookie; later requests carry
// only the cookie. Hadoop's Java client first sends OPTIONS to get the
// cookie and fails unless that answers 200.

const (
	authCookie   = "hadoop.auth"
	authValidity = 10 * time.Hour // hadoop.http.authentication.token.validity
	userKey      = "knit.user"
	// anonymous is hadoop.http.staticuser.user.
	anonymous = "dr.who"
)

// signer signs and checks hadoop.auth tokens with a per-process secret
// (a restarted knit-node asks clients to authenticate again).
type signer struct{ secret []byte }

func newSigner() (*signer, error) {
	s := &signer{secret: make([]byte, 32)}
	if _, err := rand.Read(s.secret); err != nil {
		return nil, fmt.Errorf("logs: auth secret: %w", err)
	}
	return s, nil
}

func (s *signer) sign(payload string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(payload))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// token is the cookie value for user, valid until exp.
func (s *signer) token(user string, exp time.Time) string {
	p := "u=" + user + "&p=" + user + "&t=simple&e=" + strconv.FormatInt(exp.UnixMilli(), 10)
	return p + "&s=" + s.sign(p)
}

// user returns the user of a valid, unexpired token.
func (s *signer) user(tok string, now time.Time) (string, bool) {
	tok = strings.Trim(tok, `"`)
	i := strings.LastIndex(tok, "&s=")
	if i < 0 || !hmac.Equal([]byte(s.sign(tok[:i])), []byte(tok[i+3:])) {
		return "", false
	}
	vals, err := url.ParseQuery(tok[:i])
	if err != nil || vals.Get("t") != "simple" || vals.Get("u") == "" {
		return "", false
	}
	exp, err := strconv.ParseInt(vals.Get("e"), 10, 64)
	if err != nil || now.UnixMilli() > exp {
		return "", false
	}
	return vals.Get("u"), true
}

// authenticate is the middleware: it sets the caller and answers OPTIONS.
func (s *server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		now := s.cfg.Now()
		who, ok := "", false
		if ck, err := c.Cookie(authCookie); err == nil {
			who, ok = s.signer.user(ck.Value, now)
		}
		if u := c.QueryParam("user.name"); u != "" && (!ok || u != who) {
			who, ok = u, true
			c.Response().Header().Add("Set-Cookie", authCookie+`="`+s.signer.token(u, now.Add(authValidity))+`"; Path=/; HttpOnly`)
		}
		if !ok {
			who = anonymous
		}
		c.Set(userKey, who)
		if c.Request().Method == http.MethodOptions {
			h := c.Response().Header()
			h.Set("Allow", "OPTIONS,HEAD,GET")
			h.Set("Cache-Control", "no-cache")
			return c.Blob(http.StatusOK, "application/vnd.sun.wadl+xml",
				[]byte(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><application xmlns="http://wadl.dev.java.net/2009/02"/>`))
		}
		return next(c)
	}
}

// caller is the authenticated user, or the static user dr.who.
func caller(c echo.Context) string {
	if u, ok := c.Get(userKey).(string); ok && u != "" {
		return u
	}
	return anonymous
}
