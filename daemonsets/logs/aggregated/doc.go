// Package aggregated reads and writes YARN's aggregated log files, the two
// formats a Hadoop 3.4.1 NodeManager writes to
// yarn.nodemanager.remote-app-log-dir and the stock `yarn logs` reads:
//
//   - the TFile format (LogAggregationTFileController, the default): a
//     Hadoop TFile (key/value entries in BCFile data blocks, with the
//     TFile.meta, TFile.index and BCFile.index meta blocks and the BCFile
//     trailer) whose keys are VERSION, APPLICATION_ACL, APPLICATION_OWNER
//     and one key per container, each container's value being a sequence
//     of (writeUTF name, writeUTF decimal length, bytes);
//   - the Indexed format (LogAggregationIndexedFileController): a 32-byte
//     SHA-256 of the application id, the log bytes, a Java-serialized
//     IndexedLogsMeta, its length and the 32 bytes again.
//
// Readers take an io.ReaderAt and its size and stream file contents; they
// never hold a whole log in memory and refuse structures larger than the
// file (tfile.go, indexed.go, javaser.go). Writers stream too and use the
// "none" codec. Layout (the 3.4.1 bucket folders and node file names) and
// the `yarn logs` text envelope live in layout.go and print.go.
//
// The package imports only the standard library.
package aggregated
