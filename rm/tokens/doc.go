// Package tokens holds the ResourceManager's token secret managers: the
// master keys that sign AMRMTokens, NMTokens, ContainerTokens, ClientToAM
// tokens and RM delegation tokens, the identifiers inside those tokens byte
// for byte as Hadoop 3.x writes them, and the ipc.SecretLookup adapters that
// let protocols/ipc check a token presented over SASL DIGEST-MD5.
//
// A token's password is HMAC-SHA1(master key, identifier bytes), as Hadoop's
// SecretManager.createPassword computes it. The identifier bytes are what a
// client sends back as its DIGEST-MD5 user name, so they are HMAC'd as
// received and never re-encoded before checking.
//
// # Key life cycle
//
// Three families of master keys are rolled on a schedule (Hadoop's
// AMRMTokenSecretManager, NMTokenSecretManagerInRM and
// RMContainerTokenSecretManager). Every RollPolicy.Interval a next key is
// created; after RollPolicy.ActivationDelay it becomes the current key and the
// replaced key is retired:
//
//	          roll                 activate               retention over
//	  ─────────┼──────────────────────┼──────────────────────────┼──────▶ time
//	current: K1 ······················ K2 ······························
//	next:           K2 (pending)       –
//	retired:                           K1 (still verifies) ······ K1 dropped
//
// The families differ in which key signs and how long a replaced key lives:
//
//   - AMRMTokens are signed with the next key as soon as it exists, so that
//     every AM picks up a token under it (AMRMTokens.Refresh, answered in
//     allocate) before it is activated; only the current and next keys
//     verify, as in Hadoop, and a replaced key is dropped at activation.
//   - NMTokens and ContainerTokens are signed with the current key. A retired
//     key still verifies for a retention of one rolling interval (what a
//     NodeManager's "previous" key gives), at least the container-token
//     lifetime, and NMToken keys that an attempt started containers with stay
//     verifiable for that attempt while it lives (NMTokens.PinAttempt, the
//     NodeManager's per-attempt key).
//   - RM delegation tokens follow AbstractDelegationTokenSecretManager: a new
//     key every DelegationPolicy.KeyUpdateInterval, each kept until every
//     token it signed is past its maximum lifetime; tokens themselves expire
//     at their renew date and are dropped by Roll.
//   - ClientToAM master keys are per attempt. They are derived from one root
//     secret (HMAC of the attempt id), so nothing per attempt is stored and a
//     restarted RM hands a re-registering AM the same key.
//
// # Time, persistence and concurrency
//
// Nothing here reads the wall clock on its own or starts a goroutine: Roll
// does every due transition for the time the caller passes (the RM calls it
// from a ticker), and token creation and checks read Config.Clock. Every
// change to keys or delegation tokens is saved through the KeyStore before it
// takes effect (save before use, as raft saves before it sends): a key is
// never used to sign a token that a restarted RM could not verify. The RM's
// KeyStore keeps Keys in a Kubernetes Secret.
//
// The Routers of a federation share one KeyStore (Config.Shared, over the
// federation store), as YARN's Routers share the state of their
// RouterDelegationTokenSecretManager: every change starts from the stored
// keys and is redone when another Router saved first (the store refuses a
// write over keys it has not read, ErrKeysChanged), and a token this
// Manager does not know, or knows as expired, is looked for in the store
// before it is refused. A Router keeps delegation keys alone
// (Config.DelegationOnly).
//
// A Manager is safe for concurrent use. Checks read an immutable snapshot of
// the keys; changes are serialized and swap in a new snapshot.
//
// # Errors
//
// Errors a client should see are *yarnerr.Error values of Hadoop's
// exception class (SecretManager$InvalidToken, AccessControlException,
// YarnException, InvalidContainerException) with Hadoop's message; the RPC
// server answers with them as they are. Store failures are wrapped with %w.
//
// Imports: stdlib, google.golang.org/protobuf, protocols/commonpb,
// protocols/yarnpb, protocols/token, protocols/yarnerr and protocols/ipc
// (only for the SecretLookup adapters). See
// docs/hadoop-wire-facts.md §2.4, §2.6 and §3.
package tokens
