package webshell

import (
	"embed"
	"io/fs"
)

// assets holds the page's template; static the files it loads: the
// page's script and style, and xterm.js with its fit addon from the npm
// registry (static/vendor, refreshed by `make webshell-assets`).
var (
	//go:embed assets/shell.html
	assets embed.FS
	//go:embed static
	static embed.FS
)

func staticFiles() fs.FS {
	// "static" is a folder of the embed: Sub cannot fail.
	sub, _ := fs.Sub(static, "static")
	return sub
}
