package sparkshuffle

import "strings"

// JavaError is an error as Spark's server reports it to its clients: a Java
// exception class and message, the first line of
// Throwables.getStackTraceAsString. Knit sends that line alone, without
// Java's stack trace; Spark's clients show the text and never parse it.
type JavaError struct {
	// Class is the exception's Java class, e.g. java.lang.RuntimeException.
	Class string
	// Message is the exception's message; empty when Java's is null.
	Message string
}

func (e *JavaError) Error() string {
	if e.Message == "" {
		return e.Class
	}
	return e.Class + ": " + e.Message
}

// javaText is the text an RpcFailure, ChunkFetchFailure or StreamFailure
// carries for err: a JavaError's own text, anything else as the
// RuntimeException Spark's handlers turn an unexpected failure into.
func javaText(err error) string {
	if je, ok := err.(*JavaError); ok {
		return je.Error()
	}
	return "java.lang.RuntimeException: " + err.Error()
}

func runtimeErr(msg string) error {
	return &JavaError{Class: "java.lang.RuntimeException", Message: msg}
}

func illegalArgument(msg string) error {
	return &JavaError{Class: "java.lang.IllegalArgumentException", Message: msg}
}

func illegalState(msg string) error {
	return &JavaError{Class: "java.lang.IllegalStateException", Message: msg}
}

func unsupported(msg string) error {
	return &JavaError{Class: "java.lang.UnsupportedOperationException", Message: msg}
}

// errMergingOff is what NoOpMergedShuffleFileManager throws for every
// push-based shuffle call: the YARN service's answer with merging off.
var errMergingOff = unsupported("Cannot handle shuffle block merging")

// firstLine is the exception line of a Java stack trace text.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
