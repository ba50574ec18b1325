package main

import (
	"testing"

	"go.uber.org/fx"

	"github.com/knitdev/knit/cmd/internal/fedcmd"
)

// The wiring is complete: every constructor's inputs are provided, with no
// cycle, without running any of them.
func TestWiringIsValid(t *testing.T) {
	if err := fx.ValidateApp(options(flags{}), fedcmd.Logging()); err != nil {
		t.Fatal(err)
	}
}
