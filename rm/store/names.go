package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/knitdev/knit/rks/launch"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ObjectName is the name of the YarnApplication holding application id:
// the id in lower case with '_' turned into '-', so that
// application_1700000000000_0001 is application-1700000000000-0001. It
// fails for an id that gives no valid object name.
func ObjectName(id string) (string, error) {
	if id == "" {
		return "", errors.New("store: object name: empty application id")
	}
	name := launch.ApplicationObjectName(id)
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", fmt.Errorf("store: object name for %q: %s", id, strings.Join(msgs, "; "))
	}
	return name, nil
}
