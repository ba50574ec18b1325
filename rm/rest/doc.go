// Package rest serves the ResourceManager's REST API (/ws/v1/cluster/...)
// with the JSON a Hadoop 3.4.1 ResourceManager returns: the same keys in the
// same order, Jersey's "natural" notation quirks included (empty strings and
// empty maps written as {}, maps written as repeated "entry" keys, floats
// always with a fraction), and Hadoop's RemoteException error bodies with
// GenericExceptionHandler's status codes. Answers are JSON or, for a caller
// whose Accept prefers it, the XML JAXB writes (xml.go); request bodies are
// read as JSON or, sent as application/xml or text/xml, as the XML JAXB
// reads (xmlbody.go).
//
// The package owns the Cluster interface, what it needs from the RM; New
// turns a Cluster into an http.Handler (an *echo.Echo). The caller is the
// user named by the user.name query parameter (Hadoop's pseudo
// authentication); without it, Config.AnonymousUser (Hadoop's static user
// dr.who) unless Config.RequireUser rejects writes, and the reservation
// list RMWebServices checks as one, with 401, as a Hadoop RM with an
// authentication filter does.
//
// Imports: the standard library, echo, protocols/yarnerr, protocols/yarnid,
// protocols/yarnpb and rm/apps (for apps.Filter). No globals; every handler reads the Cluster.
package rest
