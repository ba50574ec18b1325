package main

import (
	"testing"

	"go.uber.org/fx"
)

// The wiring is complete: every constructor's inputs are provided, with no
// cycle, without running any of them.
func TestWiringIsValid(t *testing.T) {
	if err := fx.ValidateApp(options(flags{})); err != nil {
		t.Fatal(err)
	}
}

func TestAServicesPortIsTheFlagsElseTheConfigurationsElseItsDefault(t *testing.T) {
	tests := []struct {
		name       string
		flag       int
		configured string
		want       int
		wantErr    bool
	}{
		{name: "the flag wins", flag: 14000, configured: ":15000", want: 14000},
		{name: "the configuration's port", configured: ":15000", want: 15000},
		{name: "the default", want: 13562},
		{name: "a configured address that is no address", configured: "nonsense", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := servicePort(tt.flag, tt.configured, 13562)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("servicePort(%d, %q) = %d, %v; want %d, error %v", tt.flag, tt.configured, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
