package federation

// UnmanagedAMName is the name of the applications the AMRMProxy's
// federation interceptor submits in secondary sub-clusters for an AM homed
// elsewhere (UnmanagedApplicationManager.APP_NAME), by which the Router's
// merged views tell them from the applications users submitted.
const UnmanagedAMName = "UnmanagedAM"
