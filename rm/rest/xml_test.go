package rest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestXMLIsChosenAsJerseyChoosesBetweenJSONAndXML(t *testing.T) {
	tests := []struct {
		accept string
		xml    bool
	}{
		{"", false},
		{"application/json", false},
		{"application/xml", true},
		{"application/xml; charset=utf-8", true},
		{"*/*", false},
		{"application/*", false},
		// Java's URLConnection sends this: anything, so JSON.
		{"text/html, image/gif, image/jpeg, */*; q=0.2", false},
		{"application/xml, */*", true},
		{"*/*, application/xml", true},
		{"application/json, application/xml", false},
		{"application/xml, application/json", true},
		{"application/xml;q=0.5, application/json", false},
		{"application/json;q=0.5, application/xml", true},
		{"application/json;q=0, application/xml;q=0.1", true},
		{"text/xml", false},
		{"application/xml;q=nonsense", false},
	}
	for _, tt := range tests {
		if got := prefersXML(tt.accept); got != tt.xml {
			t.Errorf("Accept %q: XML %v, want %v", tt.accept, got, tt.xml)
		}
	}
}

func TestXMLAnswersAreWhatJAXBWritesForTheSameObject(t *testing.T) {
	tests := []struct {
		name, json, xml string
	}{
		{"fields in order, numbers and booleans as text",
			`{"clusterInfo":{"id":1795333013199,"startedOn":1795333013199,"state":"STARTED","haState":"ACTIVE","federated":false}}`,
			`<clusterInfo><id>1795333013199</id><startedOn>1795333013199</startedOn><state>STARTED</state><haState>ACTIVE</haState><federated>false</federated></clusterInfo>`},
		{"a list is its elements, each of the list's name",
			`{"apps":{"app":[{"id":"application_1_0001","user":"alice"},{"id":"application_1_0002","user":"bob"}]}}`,
			`<apps><app><id>application_1_0001</id><user>alice</user></app><app><id>application_1_0002</id><user>bob</user></app></apps>`},
		{"a list of strings", `{"nodeLabelsInfo":{"nodeLabels":["a","b"]}}`, `<nodeLabelsInfo><nodeLabels>a</nodeLabels><nodeLabels>b</nodeLabels></nodeLabelsInfo>`},
		{"an empty list is the empty element", `{"apps":{}}`, `<apps/>`},
		{"a null root too", `{"apps":null}`, `<apps/>`},
		{"null fields are left out", `{"app":{"id":"application_1_0001","diagnostics":null,"tags":[]}}`, `<app><id>application_1_0001</id></app>`},
		{"an empty string is an element with no text", `{"app":{"diagnostics":""}}`, `<app><diagnostics></diagnostics></app>`},
		{"text is escaped", `{"app":{"name":"<script>alert('x')</script> & \"more\""}}`,
			`<app><name>&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;more&#34;</name></app>`},
		{"names with dashes", `{"app":{"am-container-spec":{"local-resources":{}}}}`, `<app><am-container-spec><local-resources/></am-container-spec></app>`},
		{"a remote exception", `{"RemoteException":{"exception":"NotFoundException","message":"java.lang.Exception: app with id: application_1_0009 not found","javaClassName":"org.apache.hadoop.yarn.webapp.NotFoundException"}}`,
			`<RemoteException><exception>NotFoundException</exception><message>java.lang.Exception: app with id: application_1_0009 not found</message><javaClassName>org.apache.hadoop.yarn.webapp.NotFoundException</javaClassName></RemoteException>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonToXML([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if want := xmlHeader + tt.xml; string(got) != want {
				t.Errorf("XML\n got  %s\n want %s", got, want)
			}
		})
	}
}

func TestAnswersXMLCannotHoldAreRefused(t *testing.T) {
	for _, doc := range []string{`[1,2]`, `"x"`, `{}`, `{"a":1,"b":2}`, `{"1abc":1}`, `{"a b":1}`, `{"xmlThing":1}`, `{"a":{"<b>":1}}`,
		`{"a":` + strings.Repeat(`{"b":`, maxXMLDepth+2) + `1` + strings.Repeat(`}`, maxXMLDepth+3), `{"a":1} {"b":2}`} {
		if got, err := jsonToXML([]byte(doc)); err == nil {
			t.Errorf("%.60s: %s, want refused", doc, got)
		}
	}
}

// xmlLeaves are an XML document's element texts in document order, and
// its root's name; the document must be well formed.
func xmlLeaves(t testing.TB, doc []byte) (root string, leaves []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var text strings.Builder
	open := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return root, leaves
		}
		if err != nil {
			t.Fatalf("not well formed: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			text.Reset()
			open = true
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			if open {
				leaves = append(leaves, text.String())
			}
			open = false
		}
	}
}

func scalarText(tok json.Token) string {
	switch v := tok.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

func TestRecordedAnswersAsXMLHoldTheirJSONsValuesInOrder(t *testing.T) {
	h := newServer(t, newFake(t))
	for _, path := range []string{"/ws/v1/cluster", "/ws/v1/cluster/info", "/ws/v1/cluster/metrics", "/ws/v1/cluster/scheduler",
		"/ws/v1/cluster/apps", "/ws/v1/cluster/apps/application_1795333013199_0002", "/ws/v1/cluster/apps/application_1795333013199_0002/appattempts",
		"/ws/v1/cluster/apps/application_1795333013199_0003/state", "/ws/v1/cluster/nodes", "/ws/v1/cluster/apps?states=NEW",
		"/ws/v1/cluster/apps/application_1795333013199_9999"} {
		t.Run(path, func(t *testing.T) {
			asJSON := serve(t, h, http.MethodGet, path, "")
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Header.Set("Accept", "application/xml")
			asXML := httptest.NewRecorder()
			h.ServeHTTP(asXML, r)
			if asXML.Code != asJSON.Code {
				t.Fatalf("status %d as XML, %d as JSON", asXML.Code, asJSON.Code)
			}
			if ct := asXML.Header().Get("Content-Type"); ct != xmlContentType {
				t.Errorf("Content-Type %q", ct)
			}
			if !strings.HasPrefix(asXML.Body.String(), xmlHeader+"<") {
				t.Errorf("the answer does not start as JAXB's: %.80s", asXML.Body)
			}
			xroot, xleaves := xmlLeaves(t, asXML.Body.Bytes())
			doc := asJSON.Body.Bytes()
			if strings.HasSuffix(path, "/state") {
				// AppState's JSON is unwrapped: its fields are the XML root's.
				doc = []byte(`{"` + appStateRoot + `":` + string(doc) + `}`)
			}
			jroot, jkeysAndLeaves := objectRootAndScalars(t, doc)
			if xroot != jroot {
				t.Errorf("root <%s>, JSON's %q", xroot, jroot)
			}
			if strings.Join(xleaves, "\x00") != strings.Join(jkeysAndLeaves, "\x00") {
				t.Errorf("values\n as XML  %q\n as JSON %q", xleaves, jkeysAndLeaves)
			}
		})
	}
}

// objectRootAndScalars are a JSON answer's root key and the texts of the
// leaf elements its XML holds, in document order: each value that is
// neither an object nor a list nor null, and an empty text for each
// object that writes no field (an empty element) and for a null root.
func objectRootAndScalars(t testing.TB, doc []byte) (string, []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	next := func() json.Token {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	next() // {
	root, _ := next().(string)
	var out []string
	// walk reads one value and reports whether its XML writes anything.
	var walk func(top bool) bool
	walk = func(top bool) bool {
		tok := next()
		switch v := tok.(type) {
		case json.Delim:
			wrote := false
			if v == '{' {
				at := len(out)
				for dec.More() {
					next() // the key
					wrote = walk(false) || wrote
				}
				next() // }
				if !wrote {
					out = append(out[:at], "")
				}
				return true
			}
			for dec.More() {
				wrote = walk(false) || wrote
			}
			next() // ]
			return wrote
		case nil:
			if top {
				out = append(out, "")
			}
			return top
		default:
			out = append(out, scalarText(tok))
			return true
		}
	}
	walk(true)
	return root, out
}

func TestErrorsAnsweredAsXMLAreRemoteExceptions(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/ws/v1/cluster/apps/application_1795333013199_9999", nil)
	r.Header.Set("Accept", "application/xml")
	w := httptest.NewRecorder()
	newServer(t, newFake(t)).ServeHTTP(w, r)
	var re struct {
		XMLName   xml.Name `xml:"RemoteException"`
		Exception string   `xml:"exception"`
		JavaClass string   `xml:"javaClassName"`
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &re); err != nil || w.Code != http.StatusNotFound ||
		re.Exception != "NotFoundException" || re.JavaClass != "org.apache.hadoop.yarn.webapp.NotFoundException" {
		t.Errorf("status %d, %+v (%v): %s", w.Code, re, err, w.Body)
	}
}

func FuzzPrefersXML(f *testing.F) {
	for _, s := range []string{"application/xml", "*/*;q=0.2, application/xml;q=0.1", "application/json;q=", ";;,,q=1", "application/xml;q=1e309"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		if prefersXML(accept) && !strings.Contains(accept, "xml") {
			t.Fatalf("XML chosen for %q", accept)
		}
	})
}

func FuzzJSONToXML(f *testing.F) {
	for _, s := range []string{`{"a":{"b":[1,"x",null,{"c":true}]}}`, `{"apps":null}`, `{"a":"<&>"}`, `{`, `{"a":[[[]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := jsonToXML(doc)
		if err != nil {
			return
		}
		xmlLeaves(t, out) // well formed, or it fails
	})
}

// Jersey writes AppState, AppQueue, AppPriority and NewApplication without
// their root in JSON; their XML has their class's root element around the
// same fields.
func TestUnwrappedAnswersAsXMLHaveTheirClassesRoot(t *testing.T) {
	tests := []struct {
		method, path, body, want string
	}{
		{http.MethodGet, app3 + "/state", "", `<appstate><state>RUNNING</state></appstate>`},
		{http.MethodGet, app3 + "/queue", "", `<appqueue><queue>root.default</queue></appqueue>`},
		{http.MethodGet, app3 + "/priority", "", `<applicationpriority><priority>0</priority></applicationpriority>`},
		{http.MethodPut, app3 + "/queue?user.name=root", `{"queue":"test"}`, `<appqueue><queue>root.test</queue></appqueue>`},
		{http.MethodPost, "/ws/v1/cluster/apps/new-application?user.name=root", "",
			`<NewApplication><application-id>application_1795333013199_0004</application-id><maximum-resource-capability><memory>`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			r.Header.Set("Accept", "application/xml")
			w := httptest.NewRecorder()
			newServer(t, newFake(t)).ServeHTTP(w, r)
			if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), xmlHeader+tt.want) {
				t.Errorf("status %d, answer\n%s\nwant it to start\n%s", w.Code, w.Body, xmlHeader+tt.want)
			}
		})
	}
}
