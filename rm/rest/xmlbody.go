package rest

import (
	"bytes"
	"encoding"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RMWebServices' writable resources consume JSON and XML alike
// (@Consumes application/json, application/xml): JAXB reads an XML body
// into the object Jersey reads the JSON into, whose element names are the
// JSON's keys, under a root element that names the object's class. So an
// XML body is turned into the JSON its Go target reads, led by the
// target's type (json tags, lists and entries), and decoded as JSON: one
// set of rules checks both.

// SubmissionRoot is the root element of an XML submission (POST /apps),
// ApplicationSubmissionContextInfo's @XmlRootElement; the Router reads
// submissions before their home does.
const SubmissionRoot = "application-submission-context"

// maxBodyDepth bounds the nesting of an XML body; a submission, the
// deepest Hadoop takes, nests six deep.
const maxBodyDepth = 32

// xmlSpace is what XML Schema's numbers and booleans may be padded with.
const xmlSpace = " \t\r\n"

// xsiNamespace is that of JAXB's xsi:nil.
const xsiNamespace = "http://www.w3.org/2001/XMLSchema-instance"

// DecodeBody reads a request body into v as Jersey reads the entity of a
// resource consuming JSON and XML: XML for an application/xml or text/xml
// Content-Type (parameters allowed), JSON for any other or none, which the
// RM has always taken although Jersey answers it 415. An XML body's root
// element must be root, as JAXB refuses one it has no class for; an empty
// root takes any. Errors are the WebApplicationException answers (400)
// Jersey gives a body JAXB cannot read.
func DecodeBody(contentType, root string, body []byte, v any) error {
	if !isXMLMediaType(contentType) {
		if err := json.Unmarshal(body, v); err != nil {
			return unreadableBody("invalid JSON body: " + err.Error())
		}
		return nil
	}
	doc, err := xmlToJSON(body, root, reflect.TypeOf(v))
	if err == nil {
		err = json.Unmarshal(doc, v)
	}
	if err != nil {
		return unreadableBody("invalid XML body: " + err.Error())
	}
	return nil
}

// isXMLMediaType reports whether a Content-Type is read as XML:
// application/xml, which RMWebServices consumes, and text/xml, which Jersey
// would refuse with 415 and Knit reads as the XML it is, as it reads any
// other type as JSON rather than refuse it.
func isXMLMediaType(contentType string) bool {
	typ, _, _ := strings.Cut(contentType, ";")
	switch strings.ToLower(strings.TrimSpace(typ)) {
	case "application/xml", "text/xml":
		return true
	}
	return false
}

// xmlToJSON turns an XML document whose root element is root (any, when
// root is empty) into the JSON that t reads, the root's content being the
// JSON's top value. A DTD is refused: Go's decoder expands no entity one
// declares, so a body leaning on one would be read otherwise than JAXB
// reads it, and a document type is no part of any body Hadoop documents.
func xmlToJSON(body []byte, root string, t reflect.Type) ([]byte, error) {
	// Java's parsers skip a byte order mark; Go's reads it as text.
	body = bytes.TrimPrefix(body, []byte("\ufeff"))
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.CharsetReader = charsetReader
	r := &bodyReader{dec: dec, fields: map[reflect.Type]map[string]jsonField{}}
	var out []byte
	seenRoot := false
	for {
		tok, err := r.token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if seenRoot {
				return nil, errors.New("more than one root element")
			}
			seenRoot = true
			if root != "" && tok.Name.Local != root {
				return nil, fmt.Errorf("root element <%s>, want <%s>", tok.Name.Local, root)
			}
			if out, err = r.value(tok, t); err != nil {
				return nil, err
			}
		case xml.CharData:
			if len(bytes.Trim(tok, xmlSpace)) > 0 {
				return nil, errors.New("text outside the root element")
			}
		}
	}
	if !seenRoot {
		return nil, errors.New("no root element")
	}
	return out, nil
}

// charsetReader reads the encodings besides UTF-8 that an XML declaration
// may name and Java clients write: ISO-8859-1 and its subset US-ASCII.
func charsetReader(label string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "iso-8859-1", "iso8859-1", "latin1", "us-ascii", "ascii":
	default:
		return nil, fmt.Errorf("unsupported encoding %q", label)
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return bytes.NewReader(out), nil
}

// bodyReader reads an XML document's elements as JSON values.
type bodyReader struct {
	dec *xml.Decoder
	// path holds the names of the open elements, for depth and errors.
	path []string
	// fields caches the JSON fields of each struct type met.
	fields map[reflect.Type]map[string]jsonField
}

// jsonField is a struct field as encoding/json reads it.
type jsonField struct {
	// elem is the type of each element of the field's name: the field's
	// own, or its items' if the field is a list.
	elem reflect.Type
	// list is set for a list, which takes every element of its name
	// (a JAXB List); other fields take the last, as JAXB sets them again.
	list bool
	// quoted is the ",string" option: a scalar written inside a string.
	quoted bool
}

// token is the document's next token; a declaration such as <!DOCTYPE>
// ends the reading.
func (r *bodyReader) token() (xml.Token, error) {
	tok, err := r.dec.Token()
	if err != nil {
		return nil, err
	}
	if _, ok := tok.(xml.Directive); ok {
		return nil, errors.New("a DOCTYPE or other declaration is not accepted")
	}
	return tok, nil
}

// where names the innermost open element by its path, for errors.
func (r *bodyReader) where() string { return strings.Join(r.path, "/") }

// value reads the content and end of the element start as the JSON t
// reads; a nil t skips the element and returns nothing.
func (r *bodyReader) value(start xml.StartElement, t reflect.Type) ([]byte, error) {
	if err := r.open(start); err != nil {
		return nil, err
	}
	defer r.close()
	switch {
	case t == nil:
		return nil, r.skip()
	case isNil(start):
		return []byte("null"), r.skip()
	}
	return r.content(t)
}

// open enters the element start, if it is not one too deep.
func (r *bodyReader) open(start xml.StartElement) error {
	if len(r.path) >= maxBodyDepth {
		return fmt.Errorf("elements nest deeper than %d at %s/%s", maxBodyDepth, r.where(), start.Name.Local)
	}
	r.path = append(r.path, start.Name.Local)
	return nil
}

func (r *bodyReader) close() { r.path = r.path[:len(r.path)-1] }

// content reads the content and end of the element last opened as the
// JSON t reads.
func (r *bodyReader) content(t reflect.Type) ([]byte, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	switch {
	case t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface:
		return r.anyValue()
	case pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) && !pt.Implements(reflect.TypeFor[json.Unmarshaler]()):
		// encoding/json reads such a value from a string.
		return r.scalar(reflect.TypeFor[string]())
	}
	switch t.Kind() {
	case reflect.Struct:
		return r.object(t)
	case reflect.Map:
		return r.mapValue(t)
	case reflect.Slice, reflect.Array:
		if isBytes(t) {
			// []byte is base64 text in JSON, as byte[] is in JAXB.
			return r.scalar(reflect.TypeFor[string]())
		}
		// A list's element outside a list field is a list of one, as
		// Jersey reads a lone value for a list.
		et := t.Elem()
		for et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if k := et.Kind(); (k == reflect.Slice || k == reflect.Array) && !isBytes(et) {
			return nil, fmt.Errorf("%s: a list of lists has no XML form", r.where())
		}
		v, err := r.content(et)
		if err != nil {
			return nil, err
		}
		return append(append([]byte("["), v...), ']'), nil
	}
	return r.scalar(t)
}

// isBytes reports whether t is a []byte, which JSON holds as a string.
func isBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

// isNil reports whether an element is JAXB's null, xsi:nil="true".
func isNil(start xml.StartElement) bool {
	for _, a := range start.Attr {
		if a.Name.Local == "nil" && (a.Name.Space == xsiNamespace || a.Name.Space == "xsi") {
			v := strings.Trim(a.Value, xmlSpace)
			return v == "true" || v == "1"
		}
	}
	return false
}

// skip reads to the end of the element last opened.
func (r *bodyReader) skip() error {
	depth := 0
	for {
		tok, err := r.token()
		if err != nil {
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			if depth++; len(r.path)+depth > maxBodyDepth {
				return fmt.Errorf("elements nest deeper than %d under %s", maxBodyDepth, r.where())
			}
		case xml.EndElement:
			if depth == 0 {
				return nil
			}
			depth--
		}
	}
}

// text reads an element's own text to its end; elements inside it are
// read past.
func (r *bodyReader) text() (string, error) {
	var b strings.Builder
	for {
		tok, err := r.token()
		if err != nil {
			return "", err
		}
		switch tok := tok.(type) {
		case xml.CharData:
			b.Write(tok)
		case xml.StartElement:
			if _, err := r.value(tok, nil); err != nil {
				return "", err
			}
		case xml.EndElement:
			return b.String(), nil
		}
	}
}

// scalar reads an element's text as the JSON value of kind t has, checked
// as XML Schema's type of the Java field would be: a string as it is,
// numbers and booleans without the padding around them.
func (r *bodyReader) scalar(t reflect.Type) ([]byte, error) {
	s, err := r.text()
	if err != nil {
		return nil, err
	}
	v := strings.Trim(s, xmlSpace)
	switch t.Kind() {
	case reflect.String:
		return marshal(s)
	case reflect.Bool:
		// XML Schema's booleans, as JAXB reads them.
		switch v {
		case "true", "1":
			return []byte("true"), nil
		case "false", "0":
			return []byte("false"), nil
		}
		return nil, fmt.Errorf("%s: %q is not a valid boolean", r.where(), s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(v, 10, t.Bits())
		if err != nil {
			return nil, r.badNumber(s, t, err)
		}
		return strconv.AppendInt(nil, n, 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "+"), 10, t.Bits())
		if err != nil {
			return nil, r.badNumber(s, t, err)
		}
		return strconv.AppendUint(nil, n, 10), nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(v, t.Bits())
		// Decimal notation only: JSON has no INF, NaN or hexadecimal.
		if err == nil && (strings.IndexFunc(v, notDecimal) >= 0 || math.IsInf(f, 0) || math.IsNaN(f)) {
			err = strconv.ErrSyntax
		}
		if err != nil {
			return nil, r.badNumber(s, t, err)
		}
		return strconv.AppendFloat(nil, f, 'g', -1, t.Bits()), nil
	}
	// Kinds JSON has no value for (complex, chan, func) are left unset.
	return []byte("null"), nil
}

func notDecimal(c rune) bool { return !strings.ContainsRune("0123456789+-.eE", c) }

// badNumber says why s is no number of t, in the Java type's name.
func (r *bodyReader) badNumber(s string, t reflect.Type, err error) error {
	name := map[reflect.Kind]string{
		reflect.Int8: "byte", reflect.Int16: "short", reflect.Int32: "int", reflect.Int: "long", reflect.Int64: "long",
		reflect.Float32: "float", reflect.Float64: "double",
	}[t.Kind()]
	if name == "" {
		name = "unsigned " + strconv.Itoa(t.Bits()) + "-bit integer"
	}
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%s: %q is out of range for %s", r.where(), s, name)
	}
	return fmt.Errorf("%s: %q is not a valid %s", r.where(), s, name)
}

// object reads an element as a struct of type t: each child element the
// field its name is the JSON name of. Text and elements no field names
// are ignored, as JAXB ignores them.
func (r *bodyReader) object(t reflect.Type) ([]byte, error) {
	fields := r.fieldsOf(t)
	o := jsonObject{values: map[string][][]byte{}}
	for {
		tok, err := r.token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.EndElement:
			return o.marshal(func(name string) bool { return fields[name].list }), nil
		case xml.StartElement:
			name := tok.Name.Local
			f, ok := fields[name]
			if !ok {
				if _, err := r.value(tok, nil); err != nil {
					return nil, err
				}
				continue
			}
			v, err := r.value(tok, f.elem)
			if err != nil {
				return nil, err
			}
			if f.quoted && string(v) != "null" {
				if v, err = marshal(string(v)); err != nil {
					return nil, err
				}
			}
			o.add(name, v, f.list)
		}
	}
}

// anyValue reads an element for a target of no fixed shape (any,
// json.RawMessage): one with elements an object of them, a name repeated a
// list, any other its text.
func (r *bodyReader) anyValue() ([]byte, error) {
	var text strings.Builder
	o := jsonObject{values: map[string][][]byte{}}
	for {
		tok, err := r.token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.CharData:
			text.Write(tok)
		case xml.StartElement:
			v, err := r.value(tok, reflect.TypeFor[any]())
			if err != nil {
				return nil, err
			}
			o.add(tok.Name.Local, v, true)
		case xml.EndElement:
			if len(o.names) == 0 {
				return marshal(text.String())
			}
			return o.marshal(func(name string) bool { return len(o.values[name]) > 1 }), nil
		}
	}
}

// mapValue reads an element as a map of type t: each entry element a key
// and value pair, as JAXB writes a Map; any other element a value under
// its own name.
func (r *bodyReader) mapValue(t reflect.Type) ([]byte, error) {
	var out bytes.Buffer
	out.WriteByte('{')
	for {
		tok, err := r.token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.EndElement:
			out.WriteByte('}')
			return out.Bytes(), nil
		case xml.StartElement:
			var key, v []byte
			if tok.Name.Local == "entry" {
				key, v, err = r.entry(tok, t.Elem())
			} else {
				key = quote(tok.Name.Local)
				v, err = r.value(tok, t.Elem())
			}
			if err != nil {
				return nil, err
			}
			if out.Len() > 1 {
				out.WriteByte(',')
			}
			out.Write(key)
			out.WriteByte(':')
			out.Write(v)
		}
	}
}

// entry reads a map's entry element: its key, as a JSON string, and its
// value, of type vt; a pair without one has "" and null.
func (r *bodyReader) entry(start xml.StartElement, vt reflect.Type) (key, v []byte, err error) {
	if err := r.open(start); err != nil {
		return nil, nil, err
	}
	defer r.close()
	key, v = quote(""), []byte("null")
	for {
		tok, err := r.token()
		if err != nil {
			return nil, nil, err
		}
		switch tok := tok.(type) {
		case xml.EndElement:
			return key, v, nil
		case xml.StartElement:
			switch tok.Name.Local {
			case "key":
				var k []byte
				if k, err = r.value(tok, reflect.TypeFor[string]()); err == nil && string(k) != "null" {
					key = k
				}
			case "value":
				v, err = r.value(tok, vt)
			default:
				_, err = r.value(tok, nil)
			}
			if err != nil {
				return nil, nil, err
			}
		}
	}
}

// quote is s as a JSON string.
func quote(s string) []byte {
	// Encoding a string cannot fail.
	b, _ := marshal(s)
	return b
}

// jsonObject gathers an object's values by name, in the order the names
// first came.
type jsonObject struct {
	names  []string
	values map[string][][]byte
}

// add gives name the value v: one more of a list's, else the only one.
func (o *jsonObject) add(name string, v []byte, list bool) {
	old, seen := o.values[name]
	if !seen {
		o.names = append(o.names, name)
	}
	if list {
		o.values[name] = append(old, v)
		return
	}
	o.values[name] = [][]byte{v}
}

// marshal writes the object, as a JSON list the values of each name list
// reports true for.
func (o *jsonObject) marshal(list func(name string) bool) []byte {
	var out bytes.Buffer
	out.WriteByte('{')
	for i, name := range o.names {
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(quote(name))
		out.WriteByte(':')
		vs := o.values[name]
		if !list(name) {
			out.Write(vs[len(vs)-1])
			continue
		}
		out.WriteByte('[')
		out.Write(bytes.Join(vs, []byte(",")))
		out.WriteByte(']')
	}
	out.WriteByte('}')
	return out.Bytes()
}

// fieldsOf are the fields encoding/json fills of a struct type t, by JSON
// name (the tag's, else the field's): the exported ones, and those of
// embedded structs unless a shallower field has their name.
func (r *bodyReader) fieldsOf(t reflect.Type) map[string]jsonField {
	if fs, ok := r.fields[t]; ok {
		return fs
	}
	fs := map[string]jsonField{}
	depthOf := map[string]int{}
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := sf.Type
			if ft.Kind() == reflect.Pointer && ft.Name() == "" {
				ft = ft.Elem()
			}
			if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				// An embedded struct can embed its own type through a
				// pointer; encoding/json stops there too.
				if depth < maxBodyDepth {
					walk(ft, depth+1)
				}
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if d, ok := depthOf[name]; ok && d <= depth {
				continue
			}
			depthOf[name] = depth
			f := jsonField{elem: sf.Type}
			if k := ft.Kind(); (k == reflect.Slice || k == reflect.Array) && !isBytes(ft) {
				f.elem, f.list = ft.Elem(), true
			}
			switch ft.Kind() {
			case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
				reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
				f.quoted = strings.Contains(","+opts+",", ",string,")
			}
			fs[name] = f
		}
	}
	walk(t, 0)
	r.fields[t] = fs
	return fs
}
