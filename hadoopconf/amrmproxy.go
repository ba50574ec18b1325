package hadoopconf

// Property names of the NodeManager's AMRMProxy, as in YarnConfiguration;
// knit-node reads them (amrmproxy.SettingsFromHadoop).
const (
	KeyAMRMProxyEnabled  = "yarn.nodemanager.amrmproxy.enabled"
	KeyAMRMProxyAddress  = "yarn.nodemanager.amrmproxy.address"
	KeyAMRMProxyPipeline = "yarn.nodemanager.amrmproxy.interceptor-class.pipeline"
)
