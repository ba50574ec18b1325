package launcher

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRunWaitsForTheCommandFileThenRunsItThroughBash(t *testing.T) {
	tests := []struct {
		name    string
		command string
		want    int
	}{
		{name: "success", command: "test -n \"$HOME\"", want: 0},
		{name: "failure keeps the exit code", command: "exit 7", want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = os.WriteFile(filepath.Join(dir, CommandFile), []byte(tt.command), 0o600)
			}()
			got, err := Run(t.Context(), Config{Dir: dir, Poll: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("exit %d, want %d", got, tt.want)
			}
		})
	}
}

func TestWaitEndsWithItsContextWhenNoCommandComes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := Wait(ctx, Config{Dir: t.TempDir(), Poll: 10 * time.Millisecond}); err == nil {
		t.Fatal("Wait returned without a command file")
	}
}
