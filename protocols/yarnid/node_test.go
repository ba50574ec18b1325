package yarnid

import "testing"

func TestNodeIDStringsRoundTrip(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{in: "127.0.1.1:8041"},
		{in: "node-1.example.com:45454"},
		{in: "no-port", wantErr: true},
		{in: "host:port", wantErr: true},
		{in: "host:99999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, err := ParseNodeID(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseNodeID(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err == nil && NodeString(n) != tt.in {
				t.Errorf("NodeString = %q, want %q", NodeString(n), tt.in)
			}
		})
	}
}
