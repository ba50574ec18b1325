package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

func TestPprofServesTheRuntimeProfiles(t *testing.T) {
	e := echo.New()
	registerPprof(e)
	tests := []struct {
		name, path, want string
	}{
		{"the index lists the profiles", "/debug/pprof/", "goroutine"},
		{"a named profile in text", "/debug/pprof/goroutine?debug=1", "goroutine profile:"},
		{"the heap in text", "/debug/pprof/heap?debug=1", "heap profile:"},
		{"the command line", "/debug/pprof/cmdline", "knit-rm.test"},
		{"symbols", "/debug/pprof/symbol", "num_symbols:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			body, _ := io.ReadAll(rec.Result().Body)
			if rec.Code != http.StatusOK || !strings.Contains(string(body), tt.want) {
				t.Errorf("GET %s: %d, body starts %.200q; want 200 with %q", tt.path, rec.Code, body, tt.want)
			}
		})
	}
}
