package logs

import (
	"encoding/json"
	"encoding/xml"
)

// jstr is a string Jersey writes as {} when empty.
type jstr string

func (s jstr) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("{}"), nil
	}
	return json.Marshal(string(s))
}

type nodeInfo struct {
	XMLName                        xml.Name `json:"-" xml:"nodeInfo"`
	HealthReport                   jstr     `json:"healthReport" xml:"healthReport"`
	TotalVmemAllocatedContainersMB int64    `json:"totalVmemAllocatedContainersMB" xml:"totalVmemAllocatedContainersMB"`
	TotalPmemAllocatedContainersMB int64    `json:"totalPmemAllocatedContainersMB" xml:"totalPmemAllocatedContainersMB"`
	TotalVCoresAllocatedContainers int64    `json:"totalVCoresAllocatedContainers" xml:"totalVCoresAllocatedContainers"`
	VmemCheckEnabled               bool     `json:"vmemCheckEnabled" xml:"vmemCheckEnabled"`
	PmemCheckEnabled               bool     `json:"pmemCheckEnabled" xml:"pmemCheckEnabled"`
	LastNodeUpdateTime             int64    `json:"lastNodeUpdateTime" xml:"lastNodeUpdateTime"`
	ResourceTypes                  string   `json:"resourceTypes" xml:"resourceTypes"`
	NodeHealthy                    bool     `json:"nodeHealthy" xml:"nodeHealthy"`
	NodeManagerVersion             string   `json:"nodeManagerVersion" xml:"nodeManagerVersion"`
	NodeManagerBuildVersion        string   `json:"nodeManagerBuildVersion" xml:"nodeManagerBuildVersion"`
	NodeManagerVersionBuiltOn      string   `json:"nodeManagerVersionBuiltOn" xml:"nodeManagerVersionBuiltOn"`
	HadoopVersion                  string   `json:"hadoopVersion" xml:"hadoopVersion"`
	HadoopBuildVersion             string   `json:"hadoopBuildVersion" xml:"hadoopBuildVersion"`
	HadoopVersionBuiltOn           string   `json:"hadoopVersionBuiltOn" xml:"hadoopVersionBuiltOn"`
	ID                             string   `json:"id" xml:"id"`
	NodeHostName                   string   `json:"nodeHostName" xml:"nodeHostName"`
	NMStartupTime                  int64    `json:"nmStartupTime" xml:"nmStartupTime"`
}

type appInfo struct {
	XMLName      xml.Name `json:"-" xml:"app"`
	ID           string   `json:"id" xml:"id"`
	State        string   `json:"state" xml:"state"`
	User         string   `json:"user" xml:"user"`
	ContainerIDs []string `json:"containerids,omitempty" xml:"containerids,omitempty"`
}

type appsInfo struct {
	XMLName xml.Name  `json:"-" xml:"apps"`
	App     []appInfo `json:"app,omitempty" xml:"app"`
}

type containerInfo struct {
	XMLName             xml.Name `json:"-" xml:"container"`
	ID                  string   `json:"id" xml:"id"`
	State               string   `json:"state" xml:"state"`
	ExitCode            int32    `json:"exitCode" xml:"exitCode"`
	Diagnostics         jstr     `json:"diagnostics" xml:"diagnostics"`
	User                string   `json:"user" xml:"user"`
	TotalMemoryNeededMB int64    `json:"totalMemoryNeededMB" xml:"totalMemoryNeededMB"`
	TotalVCoresNeeded   int64    `json:"totalVCoresNeeded" xml:"totalVCoresNeeded"`
	ExecutionType       string   `json:"executionType" xml:"executionType"`
	ContainerLogsLink   string   `json:"containerLogsLink" xml:"containerLogsLink"`
	NodeID              string   `json:"nodeId" xml:"nodeId"`
	ContainerLogFiles   []string `json:"containerLogFiles,omitempty" xml:"containerLogFiles,omitempty"`
}

type containersInfo struct {
	XMLName   xml.Name        `json:"-" xml:"containers"`
	Container []containerInfo `json:"container,omitempty" xml:"container"`
}

type containerLogInfo struct {
	FileName         string `json:"fileName" xml:"fileName"`
	FileSize         string `json:"fileSize" xml:"fileSize"`
	LastModifiedTime string `json:"lastModifiedTime" xml:"lastModifiedTime"`
}

type containerLogsInfo struct {
	XMLName            xml.Name           `json:"-" xml:"containerLogsInfo"`
	ContainerLogInfo   []containerLogInfo `json:"containerLogInfo,omitempty" xml:"containerLogInfo"`
	LogAggregationType string             `json:"logAggregationType" xml:"logAggregationType"`
	ContainerID        string             `json:"containerId" xml:"containerId"`
	NodeID             string             `json:"nodeId" xml:"nodeId"`
}

// remoteException is Hadoop's RemoteExceptionData.
type remoteException struct {
	XMLName xml.Name `json:"-" xml:"RemoteException"`
	status  int
	// text is what the plain-text log endpoint and the HTML pages say:
	// the message of the java.lang.Exception a webapp exception wraps.
	text      string
	Exception string `json:"exception" xml:"exception"`
	Message   string `json:"message" xml:"message"`
	JavaClass string `json:"javaClassName" xml:"javaClassName"`
}

func (e *remoteException) Error() string { return e.Exception + ": " + e.Message }
