// Package token holds Hadoop's security-token containers as bytes on the
// wire and on disk: Token (identifier, password, kind, service) in its
// Writable and TokenProto forms, and Credentials, the token storage stream
// that HADOOP_TOKEN_FILE_LOCATION, the NodeManager's container_tokens file
// and ContainerLaunchContextProto.tokens hold.
//
// A Credentials stream is "HDTS", a format byte (0 WRITABLE, 1 PROTOBUF) and
// a body. ReadCredentials accepts both, reads by the counts in the body and
// ignores whatever follows (Spark pads with zeros); it applies the size
// limits of its writable.Reader. Credentials.WriteTo writes WRITABLE, the form
// Hadoop 3 writers use and every Hadoop reader accepts.
//
// Only encodings live here: what an identifier means, and how a token
// becomes SASL credentials, belong to other packages.
//
// Imports: stdlib, google.golang.org/protobuf, protocols/commonpb and
// protocols/writable. See docs/hadoop-wire-facts.md §3.
package token
