package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/labstack/echo/v4"
)

// registerPprof serves Go's runtime profiles under /debug/pprof/ on the RM
// web address, for --pprof. They show every goroutine's stack and what the
// heap holds to whoever reaches the port, so the flag is off by default.
func registerPprof(e *echo.Echo) {
	e.GET("/debug/pprof/", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	// Index serves the named profiles (heap, goroutine, allocs, block,
	// mutex, threadcreate) from the path's last element.
	e.GET("/debug/pprof/:profile", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	e.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
	e.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
	e.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))
	e.Any("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
}
