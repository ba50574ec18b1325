// Package writable holds Hadoop's Writable primitives, byte for byte as
// org.apache.hadoop.io.WritableUtils and Text write them: the zero-compressed
// VLong/VInt, Text (a VInt byte length, then the bytes) and byte arrays with a
// VInt length prefix (the layout Token and Credentials use).
//
// The writing side is a set of Append functions. The reading side is Reader,
// over an io.Reader or a []byte. A Reader never trusts a length it reads: a
// negative length, or one above the Reader's Limits, is an error, and a Reader
// never allocates more than the bytes that actually arrive. Decoding errors
// are wrapped with %w, name what was being read, and never panic.
//
// Imports: stdlib only. See docs/hadoop-wire-facts.md §3.
package writable
