package store

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels on every YarnApplication, so that kubectl and label selectors can
// find applications by state, user and queue. Their values are sanitised
// (see Put); the spec holds the exact values.
const (
	LabelState = "knit.io/state"
	LabelUser  = "knit.io/user"
	LabelQueue = "knit.io/queue"
)

// ObjectName is the name of the YarnApplication holding application id:
// the id in lower case with '_' turned into '-', so that
// application_1700000000000_0001 is application-1700000000000-0001. It
// fails for an id that gives no valid object name.
func ObjectName(id string) (string, error) {
	if id == "" {
		return "", errors.New("store: object name: empty application id")
	}
	name := strings.ReplaceAll(strings.ToLower(id), "_", "-")
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", fmt.Errorf("store: object name for %q: %s", id, strings.Join(msgs, "; "))
	}
	return name, nil
}

// labelValue turns s into a valid label value: characters a label value
// may not hold become '_', the result is cut to 63 characters, and
// anything but letters and digits is trimmed from both ends. Different
// values can map to the same label value (alice@A and alice@B both become
// alice_A...), so a selector on these labels is a hint to be checked
// against the spec, never a key.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '_'
		}
	}
	if len(b) > validation.LabelValueMaxLength {
		b = b[:validation.LabelValueMaxLength]
	}
	start, end := 0, len(b)
	for start < end && !isAlnum(b[start]) {
		start++
	}
	for end > start && !isAlnum(b[end-1]) {
		end--
	}
	return string(b[start:end])
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
