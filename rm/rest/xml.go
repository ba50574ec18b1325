package rest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
)

// The REST API's resources produce JSON and XML, as Jersey's do
// (@Produces application/json, then application/xml): XML when the
// caller's Accept header prefers it, JSON otherwise. The XML is what JAXB
// writes for the objects whose JSON Jersey writes: the document's one key
// is the root element, each field an element in the JSON's order, each
// element of a list an element of the list's name, null fields left out.
// So the XML is made from the JSON answer itself, and no answer needs XML
// of its own.

// xmlHeader starts every XML answer, as JAXB writes it: no line break
// after it.
const xmlHeader = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`

// xmlContentType is the content type of XML answers.
const xmlContentType = "application/xml;charset=utf-8"

// prefersXML reports whether an Accept header asks for XML before JSON, as
// Jersey chooses between a resource's two: the caller's media ranges by
// quality, then the most specific, and the first of them either answer
// matches decides; a range both match (*/*, application/*) is JSON's,
// listed first. No header, or none of XML's, is JSON.
func prefersXML(accept string) bool {
	if !strings.Contains(accept, "xml") {
		return false
	}
	type mediaRange struct {
		typ         string
		q           float64
		specificity int
	}
	var best *mediaRange
	for _, part := range strings.Split(accept, ",") {
		typ, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		json, xml := matches(typ, "application/json"), matches(typ, "application/xml")
		if q <= 0 || (!json && !xml) {
			continue
		}
		r := &mediaRange{typ: typ, q: q, specificity: strings.Count(typ, "*")}
		// Fewer wildcards is more specific.
		if best == nil || r.q > best.q || (r.q == best.q && r.specificity < best.specificity) {
			best = r
		}
	}
	return best != nil && !matches(best.typ, "application/json")
}

// matches reports whether the media range accepts typ.
func matches(mediaRange, typ string) bool {
	if mediaRange == "*/*" || mediaRange == typ {
		return true
	}
	major, _, _ := strings.Cut(typ, "/")
	return mediaRange == major+"/*"
}

// unwrapped is an answer Jersey writes in JSON without its root
// (NewApplication and AppQueue, which Hadoop's JAXBContextResolver lists
// as root-unwrapped, and AppState and AppPriority, which it does not list
// and so get Jersey's default context, unwrapped too), so its XML root
// element, its class's @XmlRootElement, is no key of the JSON. The same name is the
// root of such a body sent in XML.
type unwrapped interface{ xmlRoot() string }

const (
	appStateRoot       = "appstate"
	appQueueRoot       = "appqueue"
	appPriorityRoot    = "applicationpriority"
	newApplicationRoot = "NewApplication"
)

// answerXML is the XML of the JSON answer b of v.
func answerXML(v any, b []byte) ([]byte, error) {
	if u, ok := v.(unwrapped); ok {
		doc := make([]byte, 0, len(b)+len(u.xmlRoot())+5)
		doc = append(doc, `{"`...)
		doc = append(doc, u.xmlRoot()...)
		doc = append(doc, `":`...)
		doc = append(doc, b...)
		doc = append(doc, '}')
		b = doc
	}
	return jsonToXML(b)
}

// maxXMLDepth bounds the nesting a JSON answer may have to be written as
// XML; the REST API's deepest (the scheduler's queues) is far from it.
const maxXMLDepth = 256

// jsonToXML writes a JSON answer, an object of one key, as the XML JAXB
// writes for the same object.
func jsonToXML(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("rest: an XML answer needs a JSON object, got %v (%v)", t, err)
	}
	var out bytes.Buffer
	out.WriteString(xmlHeader)
	roots := 0
	for dec.More() {
		name, err := elementName(dec)
		if err != nil {
			return nil, err
		}
		if roots++; roots > 1 {
			return nil, errors.New("rest: an XML answer has one root")
		}
		// A root that is null is the element, empty: JAXB's empty list.
		empty, err := writeElement(&out, dec, name, 0)
		if err != nil {
			return nil, err
		}
		if empty {
			writeStart(&out, name, true)
		}
	}
	if roots != 1 {
		return nil, errors.New("rest: an XML answer has one root")
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("rest: more than one JSON value in the answer")
	}
	return out.Bytes(), nil
}

// elementName reads an object's next key, a name XML allows.
func elementName(dec *json.Decoder) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	name, _ := t.(string)
	if !validName(name) {
		return "", fmt.Errorf("rest: %q is no XML element name", name)
	}
	return name, nil
}

// validName reports whether s is an XML name of the letters, digits and
// marks the REST API's field names use.
func validName(s string) bool {
	if s == "" || strings.HasPrefix(strings.ToLower(s), "xml") {
		return false
	}
	for i, r := range s {
		letter := r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !letter && (i == 0 || !(r == '-' || r == '.' || ('0' <= r && r <= '9'))) {
			return false
		}
	}
	return true
}

// writeElement writes the decoder's next value as element name: an object
// its fields inside it, a list one element of the name each, a null
// nothing (it reports that it wrote nothing), anything else its text.
func writeElement(out *bytes.Buffer, dec *json.Decoder, name string, depth int) (empty bool, err error) {
	if depth > maxXMLDepth {
		return false, errors.New("rest: the answer nests too deep for XML")
	}
	t, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch v := t.(type) {
	case json.Delim:
		if v == '[' {
			for dec.More() {
				if _, err := writeElement(out, dec, name, depth+1); err != nil {
					return false, err
				}
			}
			_, err := dec.Token()
			return false, err
		}
		start := out.Len()
		writeStart(out, name, false)
		for dec.More() {
			field, err := elementName(dec)
			if err != nil {
				return false, err
			}
			if _, err := writeElement(out, dec, field, depth+1); err != nil {
				return false, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return false, err
		}
		if out.Len() == start+len(name)+2 {
			// No field written: the empty element, as JAXB writes an
			// object without values.
			out.Truncate(start)
			writeStart(out, name, true)
			return false, nil
		}
		out.WriteString("</" + name + ">")
		return false, nil
	case nil:
		return true, nil
	case string:
		writeText(out, name, v)
	case json.Number:
		writeText(out, name, v.String())
	case bool:
		writeText(out, name, strconv.FormatBool(v))
	}
	return false, nil
}

func writeStart(out *bytes.Buffer, name string, empty bool) {
	out.WriteString("<" + name)
	if empty {
		out.WriteString("/>")
		return
	}
	out.WriteString(">")
}

func writeText(out *bytes.Buffer, name, text string) {
	writeStart(out, name, false)
	_ = xml.EscapeText(out, []byte(text))
	out.WriteString("</" + name + ">")
}
