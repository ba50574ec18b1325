package rest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// serveAs is serve with the body sent as contentType and the answer asked
// for as accept.
func serveAs(t testing.TB, h http.Handler, method, target, contentType, accept, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The submission of ResourceManagerRest.md's XML example, without the
// credentials the RM does not take over REST.
const docSubmissionXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<application-submission-context>
  <application-id>application_1795333013199_0004</application-id>
  <application-name>test</application-name>
  <queue>testqueue</queue>
  <priority>3</priority>
  <am-container-spec>
    <local-resources>
      <entry>
        <key>example</key>
        <value>
          <resource>hdfs://hdfs-namenode:9000/user/testuser/DistributedShell/demo-app/AppMaster.jar</resource>
          <type>FILE</type>
          <visibility>APPLICATION</visibility>
          <size>43004</size>
          <timestamp>1405452071209</timestamp>
        </value>
      </entry>
    </local-resources>
    <environment>
      <entry>
        <key>DISTRIBUTEDSHELLSCRIPTTIMESTAMP</key>
        <value>1405459400754</value>
      </entry>
      <entry>
        <key>CLASSPATH</key>
        <value>{{CLASSPATH}}&lt;CPS&gt;./*&lt;CPS&gt;{{HADOOP_CONF_DIR}}</value>
      </entry>
    </environment>
    <commands>
      <command>{{JAVA_HOME}}/bin/java -Xmx10m org.apache.hadoop.yarn.applications.distributedshell.ApplicationMaster 1&gt;&lt;LOG_DIR&gt;/AppMaster.stdout</command>
    </commands>
    <service-data>
      <entry>
        <key>test</key>
        <value>dmFsdWUxMg==</value>
      </entry>
    </service-data>
    <application-acls>
      <entry>
        <key>VIEW_APP</key>
        <value>testuser3, testuser4</value>
      </entry>
      <entry>
        <key>MODIFY_APP</key>
        <value>testuser1, testuser2</value>
      </entry>
    </application-acls>
  </am-container-spec>
  <unmanaged-AM>false</unmanaged-AM>
  <max-app-attempts>2</max-app-attempts>
  <resource>
    <memory>1024</memory>
    <vCores>1</vCores>
  </resource>
  <application-type>YARN</application-type>
  <keep-containers-across-application-attempts>false</keep-containers-across-application-attempts>
  <application-tags>
    <tag>tag 2</tag>
    <tag>tag1</tag>
  </application-tags>
  <log-aggregation-context>
    <log-include-pattern>file1</log-include-pattern>
    <log-aggregation-policy-parameters></log-aggregation-policy-parameters>
  </log-aggregation-context>
  <attempt-failures-validity-interval>3600000</attempt-failures-validity-interval>
  <reservation-id>reservation_1454114874_1</reservation-id>
  <am-black-listing-requests>
    <am-black-listing-enabled>true</am-black-listing-enabled>
    <disable-failure-threshold>0.01</disable-failure-threshold>
  </am-black-listing-requests>
</application-submission-context>`

const docSubmissionJSON = `{
  "application-id": "application_1795333013199_0004",
  "application-name": "test",
  "queue": "testqueue",
  "priority": 3,
  "am-container-spec": {
    "local-resources": {"entry": [{"key": "example", "value": {
      "resource": "hdfs://hdfs-namenode:9000/user/testuser/DistributedShell/demo-app/AppMaster.jar",
      "type": "FILE", "visibility": "APPLICATION", "size": 43004, "timestamp": 1405452071209}}]},
    "environment": {"entry": [
      {"key": "DISTRIBUTEDSHELLSCRIPTTIMESTAMP", "value": "1405459400754"},
      {"key": "CLASSPATH", "value": "{{CLASSPATH}}<CPS>./*<CPS>{{HADOOP_CONF_DIR}}"}]},
    "commands": {"command": "{{JAVA_HOME}}/bin/java -Xmx10m org.apache.hadoop.yarn.applications.distributedshell.ApplicationMaster 1><LOG_DIR>/AppMaster.stdout"},
    "service-data": {"entry": {"key": "test", "value": "dmFsdWUxMg=="}},
    "application-acls": {"entry": [{"key": "VIEW_APP", "value": "testuser3, testuser4"}, {"key": "MODIFY_APP", "value": "testuser1, testuser2"}]}
  },
  "unmanaged-AM": false,
  "max-app-attempts": 2,
  "resource": {"memory": 1024, "vCores": 1},
  "application-type": "YARN",
  "keep-containers-across-application-attempts": false,
  "application-tags": {"tag": ["tag 2", "tag1"]},
  "log-aggregation-context": {"log-include-pattern": "file1", "log-aggregation-policy-parameters": ""},
  "attempt-failures-validity-interval": 3600000,
  "reservation-id": "reservation_1454114874_1",
  "am-black-listing-requests": {"am-black-listing-enabled": true, "disable-failure-threshold": 0.01}
}`

// hdfsToken is a delegation token as Token.encodeToUrlString writes it:
// identifier "alice-id", password "pw", kind HDFS_DELEGATION_TOKEN,
// service ha-hdfs:nn.
const hdfsToken = "CGFsaWNlLWlkAnB3FUhERlNfREVMRUdBVElPTl9UT0tFTgpoYS1oZGZzOm5u"

// A body of each writable resource, as ResourceManagerRest.md writes it in
// XML, and its JSON twin.
var xmlTwins = []struct {
	name, method, target string
	status               int // what both answer
	json, xml            string
}{
	{"submit the documentation's application", "POST", "/ws/v1/cluster/apps?user.name=root", 202, docSubmissionJSON, docSubmissionXML},
	{"submit with one tag, no spec and an AM label", "POST", "/ws/v1/cluster/apps?user.name=root", 202,
		`{"application-id":"application_1795333013199_0005","unmanaged-AM":true,"application-tags":{"tag":"only"},"am-container-node-label-expression":"gpu","resource":{"memory":2048,"vCores":2}}`,
		`<application-submission-context><application-id>application_1795333013199_0005</application-id><unmanaged-AM>1</unmanaged-AM>` +
			`<application-tags><tag>only</tag></application-tags><am-container-node-label-expression>gpu</am-container-node-label-expression>` +
			`<resource><memory> 2048 </memory><vCores>+2</vCores></resource></application-submission-context>`},
	{"submit a request the cluster refuses", "POST", "/ws/v1/cluster/apps?user.name=root", 400,
		`{"application-id":"application_1795333013199_0004","resource":{"memory":99999,"vCores":1}}`,
		`<application-submission-context><application-id>application_1795333013199_0004</application-id><resource><memory>99999</memory><vCores>1</vCores></resource></application-submission-context>`},
	{"submit with credentials", "POST", "/ws/v1/cluster/apps?user.name=root", 202,
		`{"application-id":"application_1795333013199_0004","am-container-spec":{"credentials":{"tokens":{"entry":{"key":"hdfs","value":"` + hdfsToken + `"}},` +
			`"secrets":{"entry":{"key":"secret1","value":"c2VjcmV0MQ"}}}}}`,
		`<application-submission-context><application-id>application_1795333013199_0004</application-id><am-container-spec><credentials>` +
			`<tokens><entry><key>hdfs</key><value>` + hdfsToken + `</value></entry></tokens><secrets>` +
			`<entry><key>secret1</key><value>c2VjcmV0MQ</value></entry></secrets></credentials></am-container-spec></application-submission-context>`},
	{"submit with a token that is none", "POST", "/ws/v1/cluster/apps?user.name=root", 400,
		`{"application-id":"application_1795333013199_0004","am-container-spec":{"credentials":{"tokens":{"entry":{"key":"hdfs","value":"AAAA"}}}}}`,
		`<application-submission-context><application-id>application_1795333013199_0004</application-id><am-container-spec><credentials>` +
			`<tokens><entry><key>hdfs</key><value>AAAA</value></entry></tokens></credentials></am-container-spec></application-submission-context>`},
	{"kill", "PUT", app3 + "/state?user.name=root", 202, `{"state":"KILLED"}`,
		`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n<appstate>\n  <state>KILLED</state>\n</appstate>"},
	{"kill with diagnostics", "PUT", app3 + "/state?user.name=root", 202, `{"state":"KILLED","diagnostics":"no longer needed"}`,
		`<appstate><state>KILLED</state><diagnostics>no longer needed</diagnostics></appstate>`},
	{"move to a state other than KILLED", "PUT", app3 + "/state?user.name=root", 400, `{"state":"FINISHED"}`,
		`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><appstate><state>FINISHED</state></appstate>`},
	{"put the state the app is in", "PUT", app3 + "/state?user.name=root", 200, `{"state":"RUNNING"}`,
		`<appstate><state>RUNNING</state></appstate>`},
	{"kill another's app", "PUT", app3 + "/state?user.name=mallory", 403, `{"state":"KILLED"}`, `<appstate><state>KILLED</state></appstate>`},
	{"move", "PUT", app3 + "/queue?user.name=root", 200, `{"queue":"test"}`,
		`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n<appqueue>\n  <queue>test</queue>\n</appqueue>"},
	{"move a killed app", "PUT", "/ws/v1/cluster/apps/application_1795333013199_0001/queue?user.name=root", 400, `{"queue":"test"}`,
		`<appqueue><queue>test</queue></appqueue>`},
	{"reprioritize", "PUT", app3 + "/priority?user.name=root", 200, `{"priority":8}`,
		`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n<applicationpriority>\n  <priority>8</priority>\n</applicationpriority>"},
	{"reprioritize without a priority", "PUT", app3 + "/priority?user.name=root", 200, `{}`, `<applicationpriority/>`},
	{"set the lifetime", "PUT", app3 + "/timeout?user.name=root", 200, `{"timeout":{"type":"LIFETIME","expiryTime":"2026-11-22T08:00:00.000+0000"}}`,
		`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` +
			"\n<timeout>\n  <type>LIFETIME</type>\n  <expiryTime>2026-11-22T08:00:00.000+0000</expiryTime>\n</timeout>"},
	{"set a timeout of no type", "PUT", app3 + "/timeout?user.name=root", 400, `{"timeout":{"expiryTime":"2026-11-22T08:00:00.000+0000"}}`,
		`<timeout><expiryTime>2026-11-22T08:00:00.000+0000</expiryTime></timeout>`},
	{"set the lifetime of an unknown app", "PUT", "/ws/v1/cluster/apps/application_1795333013199_9999/timeout?user.name=root", 404,
		`{"type":"LIFETIME","expiryTime":"2026-11-22T08:00:00.000+0000"}`,
		`<timeout><type>LIFETIME</type><expiryTime>2026-11-22T08:00:00.000+0000</expiryTime></timeout>`},
}

func TestXMLBodiesDoWhatTheirJSONTwinsDo(t *testing.T) {
	for _, tt := range xmlTwins {
		for _, contentType := range []string{"application/xml", "text/xml; charset=UTF-8", "Application/XML;charset=utf-8"} {
			t.Run(tt.name+"/"+contentType, func(t *testing.T) {
				fj, fx := newFake(t), newFake(t)
				wj := serveAs(t, newServer(t, fj), tt.method, tt.target, "application/json", "", tt.json)
				wx := serveAs(t, newServer(t, fx), tt.method, tt.target, contentType, "", tt.xml)
				if wj.Code != tt.status {
					t.Fatalf("as JSON %d %s, want %d", wj.Code, wj.Body, tt.status)
				}
				if wx.Code != wj.Code || wx.Body.String() != wj.Body.String() || wx.Header().Get("Location") != wj.Header().Get("Location") {
					t.Fatalf("as XML %d %s (Location %q)\nas JSON %d %s (Location %q)",
						wx.Code, wx.Body, wx.Header().Get("Location"), wj.Code, wj.Body, wj.Header().Get("Location"))
				}
				if len(fx.submitted) != len(fj.submitted) {
					t.Fatalf("submitted %d as XML, %d as JSON", len(fx.submitted), len(fj.submitted))
				}
				for i := range fj.submitted {
					if !proto.Equal(fx.submitted[i], fj.submitted[i]) {
						t.Errorf("submitted as XML\n %v\nas JSON\n %v", fx.submitted[i], fj.submitted[i])
					}
				}
				if !slices.Equal(fx.killed, fj.killed) {
					t.Errorf("killed %v as XML, %v as JSON", fx.killed, fj.killed)
				}
				for i := range fj.apps {
					if !proto.Equal(fx.apps[i].Report, fj.apps[i].Report) {
						t.Errorf("app as XML\n %v\nas JSON\n %v", fx.apps[i].Report, fj.apps[i].Report)
					}
				}
			})
		}
	}
}

func TestTheDocumentationsSubmissionArrivesWhole(t *testing.T) {
	f := newFake(t)
	w := serveAs(t, newServer(t, f), "POST", "/ws/v1/cluster/apps?user.name=root", "application/xml", "", docSubmissionXML)
	if w.Code != http.StatusAccepted || len(f.submitted) != 1 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	sc := f.submitted[0]
	spec := sc.GetAmContainerSpec()
	env := spec.GetEnvironment()
	if sc.GetQueue() != "testqueue" || sc.GetPriority().GetPriority() != 3 || sc.GetMaxAppAttempts() != 2 || sc.GetUnmanagedAm() ||
		sc.GetAttemptFailuresValidityInterval() != 3600000 || !slices.Equal(sc.GetApplicationTags(), []string{"tag 2", "tag1"}) ||
		len(env) != 2 || env[1].GetValue() != "{{CLASSPATH}}<CPS>./*<CPS>{{HADOOP_CONF_DIR}}" ||
		len(spec.GetCommand()) != 1 || !strings.HasSuffix(spec.GetCommand()[0], " 1><LOG_DIR>/AppMaster.stdout") ||
		spec.GetLocalResources()[0].GetValue().GetSize() != 43004 || string(spec.GetServiceData()[0].GetValue()) != "value12" ||
		len(spec.GetApplication_ACLs()) != 2 {
		t.Errorf("submitted %v", sc)
	}
}

// unreadableMessage is the message of Jersey's answer to a body it cannot
// read, whose linked exception reads detail.
func unreadableMessage(detail string) string {
	return "javax.xml.bind.UnmarshalException\n - with linked exception:\n[" + detail + "]"
}

func TestBadXMLBodiesAreBadRequests(t *testing.T) {
	const state = app3 + "/state?user.name=root"
	const priority = app3 + "/priority?user.name=root"
	const submit = "/ws/v1/cluster/apps?user.name=root"
	deep := "<appstate>" + strings.Repeat("<x>", maxBodyDepth) + strings.Repeat("</x>", maxBodyDepth) + "</appstate>"
	tests := []struct {
		name, target, body string
		message            string // the linked exception's text, after "invalid XML body: "
	}{
		{"not well formed", state, `<appstate><state>KILLED</appstate>`, "XML syntax error on line 1: element <state> closed by </appstate>"},
		{"cut short", state, `<appstate><state>KILLED</state>`, "XML syntax error on line 1: unexpected EOF"},
		{"empty", state, ``, "no root element"},
		{"JSON sent as XML", state, `{"state":"KILLED"}`, "text outside the root element"},
		{"two roots", state, `<appstate/><appstate/>`, "more than one root element"},
		{"another resource's root", state, `<appqueue><state>KILLED</state></appqueue>`, "root element <appqueue>, want <appstate>"},
		{"the documentation's table name for the priority's root", priority, `<apppriority><priority>5</priority></apppriority>`,
			"root element <apppriority>, want <applicationpriority>"},
		{"a priority that is no number", priority, `<applicationpriority><priority>high</priority></applicationpriority>`,
			`applicationpriority/priority: "high" is not a valid int`},
		{"an empty priority", priority, `<applicationpriority><priority/></applicationpriority>`,
			`applicationpriority/priority: "" is not a valid int`},
		{"a priority out of int's range", priority, `<applicationpriority><priority>2147483648</priority></applicationpriority>`,
			`applicationpriority/priority: "2147483648" is out of range for int`},
		{"a fractional memory", submit, `<application-submission-context><application-id>application_1795333013199_0004</application-id><resource><memory>1.5</memory></resource></application-submission-context>`,
			`application-submission-context/resource/memory: "1.5" is not a valid long`},
		{"a boolean that is none", submit, `<application-submission-context><unmanaged-AM>yes</unmanaged-AM></application-submission-context>`,
			`application-submission-context/unmanaged-AM: "yes" is not a valid boolean`},
		{"a DOCTYPE", state, `<?xml version="1.0"?><!DOCTYPE appstate [<!ENTITY k "KILLED">]><appstate><state>&k;</state></appstate>`,
			"a DOCTYPE or other declaration is not accepted"},
		{"an external entity", state, `<!DOCTYPE appstate [<!ENTITY k SYSTEM "file:///etc/passwd">]><appstate><state>&k;</state></appstate>`,
			"a DOCTYPE or other declaration is not accepted"},
		{"an undeclared entity", state, `<appstate><state>&k;</state></appstate>`, "XML syntax error on line 1: invalid character entity &k;"},
		{"too deep", state, deep, "elements nest deeper than 32 under appstate/x"},
		{"too deep in a known field", state, "<appstate>" + strings.Repeat("<state>", maxBodyDepth) + strings.Repeat("</state>", maxBodyDepth) + "</appstate>",
			"elements nest deeper than 32 under appstate/state/state"},
		{"an encoding Java has but the RM does not", state, `<?xml version="1.0" encoding="UTF-16"?><appstate/>`,
			`xml: opening charset "UTF-16": unsupported encoding "UTF-16"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := http.MethodPut
			if tt.target == submit {
				method = http.MethodPost
			}
			w := serveAs(t, newServer(t, newFake(t)), method, tt.target, "application/xml", "", tt.body)
			want := `{"RemoteException":{"exception":"WebApplicationException","message":` + string(quote(unreadableMessage("invalid XML body: "+tt.message))) +
				`,"javaClassName":"javax.ws.rs.WebApplicationException"}}`
			if w.Code != http.StatusBadRequest || w.Body.String() != want {
				t.Errorf("%d %s\nwant 400 %s", w.Code, w.Body, want)
			}
		})
	}
}

func TestBadXMLBodyIsAnsweredInXMLWhenAskedFor(t *testing.T) {
	w := serveAs(t, newServer(t, newFake(t)), "PUT", app3+"/priority?user.name=root", "application/xml", "application/xml",
		`<applicationpriority><priority>high</priority></applicationpriority>`)
	want := xmlHeader + `<RemoteException><exception>WebApplicationException</exception>` +
		`<message>javax.xml.bind.UnmarshalException&#xA; - with linked exception:&#xA;[invalid XML body: applicationpriority/priority: &#34;high&#34; is not a valid int]</message>` +
		`<javaClassName>javax.ws.rs.WebApplicationException</javaClassName></RemoteException>`
	if w.Code != http.StatusBadRequest || w.Header().Get("Content-Type") != xmlContentType || w.Body.String() != want {
		t.Errorf("%d %s %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
}

func TestXMLBodyOverTheLimitIsABadRequest(t *testing.T) {
	body := "<appstate><diagnostics>" + strings.Repeat("x", MaxBodyBytes) + "</diagnostics></appstate>"
	w := serveAs(t, newServer(t, newFake(t)), "PUT", app3+"/state?user.name=root", "application/xml", "", body)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "request body larger than") {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

func TestBodiesOfOtherContentTypesAreReadAsJSON(t *testing.T) {
	for _, tt := range []struct {
		contentType string
		xml         bool
	}{
		{"", false},
		{"application/json", false},
		{"application/json; charset=UTF-8", false},
		{"text/plain", false},
		{"application/x-www-form-urlencoded", false},
		{"application/xml", true},
		{"application/xml; charset=UTF-8", true},
		{"text/xml", true},
		{" TEXT/XML ;charset=iso-8859-1", true},
		{"application/xhtml+xml", false},
		{"application/xml; charset", true},
	} {
		if got := isXMLMediaType(tt.contentType); got != tt.xml {
			t.Errorf("%q: XML %v, want %v", tt.contentType, got, tt.xml)
		}
	}
	// A body without a type is JSON, as the RM has always read it.
	f := newFake(t)
	if w := serveAs(t, newServer(t, f), "PUT", app3+"/priority?user.name=root", "", "", `{"priority":4}`); w.Code != 200 || w.Body.String() != `{"priority":4}` {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

// shapes are targets of every shape xmlToJSON is led by.
type (
	shapeInner struct {
		N int32 `json:"n"`
	}
	shapeEmbedded struct {
		Promoted string `json:"promoted"`
		Shadowed string `json:"shadowed"`
	}
	shapes struct {
		shapeEmbedded
		Shadowed string            `json:"shadowed"`
		List     list[shapeInner]  `json:"list"`
		Slice    []string          `json:"slice"`
		Ptr      *shapeInner       `json:"ptr"`
		Entries  entries[string]   `json:"entries"`
		Map      map[string]int64  `json:"map"`
		Raw      json.RawMessage   `json:"raw"`
		Any      any               `json:"any"`
		Quoted   int64             `json:"quoted,string"`
		Bytes    []byte            `json:"bytes"`
		Float    float64           `json:"float"`
		Bool     *bool             `json:"bool"`
		Untagged string            ``
		Skipped  string            `json:"-"`
		private  string            // unexported, so never filled
		Lists    map[string][]bool `json:"lists"`
	}
)

func TestXMLIsReadAsTheTargetTypeReadsJSON(t *testing.T) {
	tests := []struct {
		name, xml, json string
	}{
		{"a list of one", `<r><list><n>1</n></list></r>`, `{"list":[{"n":1}]}`},
		{"a list of many, wherever its elements are", `<r><list><n>1</n></list><ptr><n>2</n></ptr><list><n>3</n></list></r>`,
			`{"list":[{"n":1},{"n":3}],"ptr":{"n":2}}`},
		{"a slice", `<r><slice>a</slice><slice> b </slice></r>`, `{"slice":["a"," b "]}`},
		{"a field given twice keeps the last", `<r><ptr><n>1</n></ptr><ptr><n>2</n></ptr></r>`, `{"ptr":{"n":2}}`},
		{"entries", `<r><entries><entry><key>k</key><value>v</value></entry></entries></r>`, `{"entries":{"entry":[{"key":"k","value":"v"}]}}`},
		{"a map of entries and names", `<r><map><entry><key>a</key><value>1</value></entry><b>2</b><entry><value>3</value></entry></map></r>`,
			`{"map":{"a":1,"b":2,"":3}}`},
		{"a map of lists", `<r><lists><entry><key>a</key><value>1</value></entry></lists></r>`, `{"lists":{"a":[true]}}`},
		{"raw JSON of the element's own shape", `<r><raw><a>1</a><b>x</b><b>y</b><c><d/></c></raw></r>`, `{"raw":{"a":"1","b":["x","y"],"c":{"d":""}}}`},
		{"any", `<r><any>text</any></r>`, `{"any":"text"}`},
		{"the string option", `<r><quoted>42</quoted></r>`, `{"quoted":"42"}`},
		{"bytes as base64 text", `<r><bytes>AQI=</bytes></r>`, `{"bytes":"AQI="}`},
		{"numbers and booleans padded and signed", `<r><float> -1.5e3 </float><bool>0</bool><ptr><n>+7</n></ptr></r>`,
			`{"float":-1500,"bool":false,"ptr":{"n":7}}`},
		{"an embedded struct's fields, unless shadowed", `<r><promoted>p</promoted><shadowed>s</shadowed></r>`, `{"promoted":"p","shadowed":"s"}`},
		{"an untagged field by its Go name", `<r><Untagged>u</Untagged><untagged>no</untagged></r>`, `{"Untagged":"u"}`},
		{"unknown, skipped and private elements ignored", `<r><Skipped>x</Skipped><private>x</private><other><deep>x</deep></other></r>`, `{}`},
		{"xsi:nil is null", `<r xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ptr xsi:nil="true"/><bool xsi:nil="true"/></r>`,
			`{"ptr":null,"bool":null}`},
		{"text between fields ignored", `<r>hello<slice>a</slice>world</r>`, `{"slice":["a"]}`},
		{"comments, instructions and CDATA", `<?xml version="1.0"?><!-- c --><r><?pi x?><slice><![CDATA[<a&b>]]></slice></r><!-- c -->`,
			`{"slice":["<a&b>"]}`},
		{"a byte order mark", "\ufeff<r><slice>a</slice></r>", `{"slice":["a"]}`},
		{"ISO-8859-1", "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><r><slice>caf\xe9</slice></r>", `{"slice":["café"]}`},
		{"namespaces ignored", `<r xmlns="urn:x"><slice>a</slice></r>`, `{"slice":["a"]}`},
		{"nesting as deep as allowed", "<r>" + strings.Repeat("<x>", maxBodyDepth-1) + strings.Repeat("</x>", maxBodyDepth-1) + "<slice>a</slice></r>",
			`{"slice":["a"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := xmlToJSON([]byte(tt.xml), "r", reflect.TypeFor[*shapes]())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.json {
				t.Errorf("JSON\n got  %s\n want %s", got, tt.json)
			}
			var v shapes
			if err := json.Unmarshal(got, &v); err != nil {
				t.Errorf("the target does not read it: %v", err)
			}
		})
	}
}

func TestXMLOfBadValuesIsRefused(t *testing.T) {
	for _, doc := range []string{
		`<r><float>INF</float></r>`, `<r><float>NaN</float></r>`, `<r><float>0x1p3</float></r>`, `<r><float>1e999</float></r>`,
		`<r><ptr><n>1_000</n></ptr></r>`, `<r><ptr><n>0x10</n></ptr></r>`, `<r><bool>TRUE</bool></r>`, `<r><map><a>x</a></map></r>`,
		`<other/>`, `<r>`, `<r></s>`,
	} {
		if got, err := xmlToJSON([]byte(doc), "r", reflect.TypeFor[*shapes]()); err == nil {
			t.Errorf("%s: %s, want refused", doc, got)
		}
	}
}

func FuzzXMLBody(f *testing.F) {
	for _, tt := range xmlTwins {
		f.Add([]byte(tt.xml))
	}
	for _, s := range []string{``, `<appstate/>`, `<a><b><c/></b></a>`, `<!DOCTYPE a><a/>`, `<r xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><ptr xsi:nil="1"/></r>`,
		`<r><map><entry><key>k</key><value>1</value></entry></map><raw><a/><a/></raw></r>`, "<?xml version=\"1.0\" encoding=\"latin1\"?><r>\xff</r>"} {
		f.Add([]byte(s))
	}
	targets := []reflect.Type{
		reflect.TypeFor[*submissionContext](), reflect.TypeFor[*appState](), reflect.TypeFor[*appPriority](),
		reflect.TypeFor[*appQueue](), reflect.TypeFor[*appTimeoutIn](), reflect.TypeFor[*shapes](),
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, typ := range targets {
			doc, err := xmlToJSON(body, "", typ)
			if err != nil {
				continue
			}
			// Bounded work: the JSON grows with the body, no faster than
			// escaping each byte as \u00XX.
			if len(doc) > 6*len(body)+16 {
				t.Fatalf("%d bytes of JSON from %d of XML", len(doc), len(body))
			}
			if !json.Valid(doc) {
				t.Fatalf("not JSON: %s", doc)
			}
			v := reflect.New(typ.Elem()).Interface()
			if err := DecodeBody("application/xml", "", body, v); err != nil {
				if re, ok := err.(*remoteException); !ok || re.status != http.StatusBadRequest {
					t.Fatalf("error %T %v", err, err)
				}
			}
		}
		if _, err := decodeSubmission("application/xml", body); err != nil {
			if re, ok := err.(*remoteException); !ok || re.status != http.StatusBadRequest {
				t.Fatalf("error %T %v", err, err)
			}
		}
	})
}
