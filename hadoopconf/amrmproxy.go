package hadoopconf

// Property names of the NodeManager's AMRMProxy, as in YarnConfiguration;
// knit-node reads them (amrmproxy.SettingsFromHadoop).
const (
	KeyAMRMProxyEnabled  = "yarn.nodemanager.amrmproxy.enabled"
	KeyAMRMProxyAddress  = "yarn.nodemanager.amrmproxy.address"
	KeyAMRMProxyPipeline = "yarn.nodemanager.amrmproxy.interceptor-class.pipeline"
)

// Knit's own settings of the AMRMProxy's throttling interceptor, which YARN
// does not have (amrmproxy.ThrottleSettingsFromHadoop).
const (
	KeyAMRMProxyThrottleMaxPending  = "knit.amrmproxy.throttle.max-pending-containers"
	KeyAMRMProxyThrottleMinInterval = "knit.amrmproxy.throttle.min-allocate-interval-ms"
)

// KeyFederationMachineList names the file that maps nodes to sub-clusters
// and racks ("node, sub-cluster, rack" a line), which the AMRMProxy's
// locality policy and the Router's LocalityRouterPolicy read
// (YarnConfiguration.FEDERATION_MACHINE_LIST).
const KeyFederationMachineList = "yarn.federation.machine-list"
