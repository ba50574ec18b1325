package tokens

// msgCannotDeserialize is SaslRpcServer.getIdentifier's message for an
// identifier that does not parse.
const msgCannotDeserialize = "Can't de-serialize tokenIdentifier"
