// Package recordings finds the shared recordings of real Hadoop and Spark
// processes (../shared/testdata beside the checkout) for the tests that
// replay them. Under CI (CI=true) a missing folder fails the test, since a
// skipped replay would let a wire regression land; on a developer's machine
// without ../shared the test skips with a message.
package recordings

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns the recording at elem under ../shared/testdata, e.g.
// Path(t, "hadoop-shuffle", "fetcher"). The module root is found from the
// test's working folder (its package folder), so the path holds wherever
// the checkout is.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	return shared(t, append([]string{"testdata"}, elem...)...)
}

// Docs returns the file at elem under ../shared/docs (the fixtures the
// design notes cite), failing or skipping as Path does.
func Docs(t testing.TB, elem ...string) string {
	t.Helper()
	return shared(t, append([]string{"docs"}, elem...)...)
}

func shared(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("recordings: %v", err)
	}
	p := filepath.Join(append([]string{root, "..", "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("recording %s is missing under CI: ../shared must be beside the checkout (%v)", filepath.Join(elem...), err)
		}
		t.Skipf("recording %s not found: ../shared/testdata is not beside this checkout", filepath.Join(elem...))
	}
	return p
}

// moduleRoot is the nearest folder above the working folder with a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
