//go:build tools

// Package tools pins, through go.mod, the versions of the code generators
// that `make proto` runs.
package tools

import (
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
