// Package digestmd5 implements the SASL DIGEST-MD5 mechanism (RFC 2831) in
// the subset Hadoop's TOKEN authentication uses: qop "auth" only, algorithm
// md5-sess, one round trip with no subsequent authentication and no
// integrity or privacy layer.
//
// Both ends live here so that they can be tested against each other and
// against independent implementations (the JDK's javax.security.sasl client
// and github.com/beltran/gosasl). A Server serves Knit's RM and NM ports; a
// Client is used by Knit's own RPC client.
//
// In Hadoop the username is the base64 of a token identifier and the password
// is the base64 of the token password; the protocol is "" and the server name
// (and realm) is "default", so the digest-uri is "/default". This package
// knows nothing of tokens: the Server asks a lookup callback for the password
// of a username and passes the callback's error through wrapped, so the RPC
// layer can answer with the right Java exception (for example
// SecretManager$InvalidToken).
//
// A Server and a Client each carry one exchange and are not safe for
// concurrent use. Every error about a message wraps one of the Err
// sentinels; errors of the Lookup, Nonce and CNonce callbacks are passed
// through wrapped with %w. Input never causes a panic: the directive parser
// and Server.Evaluate are fuzzed (FuzzParseDirectives, FuzzServerEvaluate).
//
// Imports: the standard library only.
package digestmd5
