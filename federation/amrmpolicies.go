package federation

// WeightedLocalityPolicyManager is the policy manager whose AMRMProxy
// policy is LocalityMulticastAMRMProxyPolicy and whose router policy is
// LocalityRouterPolicy; the global policy generator writes its weights.
const WeightedLocalityPolicyManager = managerPackage + "WeightedLocalityPolicyManager"
