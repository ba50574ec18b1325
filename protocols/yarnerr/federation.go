package yarnerr

// YARN Federation's exceptions (org.apache.hadoop.yarn.server.federation),
// each a YarnException, as a Router answers them.
const (
	federationPackage = "org.apache.hadoop.yarn.server.federation."
	// FederationPolicy is a router policy's refusal: no active
	// sub-cluster, no positive weight.
	FederationPolicy Class = federationPackage + "policies.exceptions.FederationPolicyException"
	// FederationPolicyInitialization is a policy that cannot be built
	// from its configuration.
	FederationPolicyInitialization Class = federationPackage + "policies.exceptions.FederationPolicyInitializationException"
)
