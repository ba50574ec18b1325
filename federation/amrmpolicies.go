package federation

// WeightedLocalityPolicyManager is the policy manager whose AMRMProxy
// policy is LocalityMulticastAMRMProxyPolicy (its router policy,
// LocalityRouterPolicy, is not the Router's yet).
const WeightedLocalityPolicyManager = managerPackage + "WeightedLocalityPolicyManager"
