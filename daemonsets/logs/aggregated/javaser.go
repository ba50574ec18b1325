package aggregated

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A subset of Java object serialization (java.io.ObjectOutputStream,
// protocol version 2), enough for the IndexedLogsMeta graph: objects of
// Serializable classes with or without writeObject data, strings, enums,
// nulls, back references and arrays. Externalizable classes, proxies and
// exceptions in the stream are refused.

const (
	tcNull           = 0x70
	tcReference      = 0x71
	tcClassDesc      = 0x72
	tcObject         = 0x73
	tcString         = 0x74
	tcArray          = 0x75
	tcClass          = 0x76
	tcBlockData      = 0x77
	tcEndBlockData   = 0x78
	tcBlockDataLong  = 0x7a
	tcLongString     = 0x7c
	tcEnum           = 0x7e
	scWriteMethod    = 0x01
	scSerializable   = 0x02
	scExternalizable = 0x04
	scEnum           = 0x10
	baseHandle       = 0x7e0000
	// maxJavaDepth bounds nesting so a hostile index cannot exhaust the
	// stack.
	maxJavaDepth = 64
)

type jClass struct {
	name   string
	suid   int64
	flags  byte
	fields []jField
	super  *jClass
}

type jField struct {
	typ   byte
	name  string
	class string // for L and [ fields: the type signature
}

// jObject is a decoded object: field values by name (of the whole class
// chain) and, for classes with writeObject, what it wrote after its
// fields (block data as []byte, then objects).
type jObject struct {
	class  *jClass
	fields map[string]any
	annot  []any
}

type jEnum struct {
	class *jClass
	name  string
}

type jArray struct {
	class  *jClass
	values []any
}

// javaDecoder reads one serialized object from a byte slice.
type javaDecoder struct {
	b       []byte
	pos     int
	handles []any
	depth   int
}

func decodeJava(b []byte) (any, error) {
	d := &javaDecoder{b: b}
	magic, err := d.u16()
	if err != nil {
		return nil, err
	}
	ver, err := d.u16()
	if err != nil {
		return nil, err
	}
	if magic != 0xaced || ver != 5 {
		return nil, corruptf("not a Java serialization stream (%#x %d)", magic, ver)
	}
	return d.content()
}

func (d *javaDecoder) need(n int) ([]byte, error) {
	if n < 0 || n > len(d.b)-d.pos {
		return nil, corruptf("serialized index ends early (need %d bytes at %d)", n, d.pos)
	}
	p := d.b[d.pos : d.pos+n]
	d.pos += n
	return p, nil
}

func (d *javaDecoder) u8() (byte, error) {
	p, err := d.need(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func (d *javaDecoder) u16() (uint16, error) {
	p, err := d.need(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(p), nil
}

func (d *javaDecoder) u32() (uint32, error) {
	p, err := d.need(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(p), nil
}

func (d *javaDecoder) u64() (uint64, error) {
	p, err := d.need(8)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(p), nil
}

func (d *javaDecoder) utf(long bool) (string, error) {
	var n int
	if long {
		v, err := d.u64()
		if err != nil {
			return "", err
		}
		if v > math.MaxInt32 {
			return "", corruptf("string of %d bytes", v)
		}
		n = int(v)
	} else {
		v, err := d.u16()
		if err != nil {
			return "", err
		}
		n = int(v)
	}
	p, err := d.need(n)
	if err != nil {
		return "", err
	}
	return decodeModifiedUTF8(p)
}

func (d *javaDecoder) newHandle(v any) int {
	d.handles = append(d.handles, v)
	return len(d.handles) - 1
}

// content reads one content item: an object or block data.
func (d *javaDecoder) content() (any, error) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > maxJavaDepth {
		return nil, corruptf("serialized index nested deeper than %d", maxJavaDepth)
	}
	tc, err := d.u8()
	if err != nil {
		return nil, err
	}
	switch tc {
	case tcNull:
		return nil, nil
	case tcReference:
		h, err := d.u32()
		if err != nil {
			return nil, err
		}
		i := int64(h) - baseHandle
		if i < 0 || i >= int64(len(d.handles)) {
			return nil, corruptf("reference to unknown handle %#x", h)
		}
		return d.handles[i], nil
	case tcString, tcLongString:
		s, err := d.utf(tc == tcLongString)
		if err != nil {
			return nil, err
		}
		d.newHandle(s)
		return s, nil
	case tcClassDesc:
		return d.classDescBody()
	case tcObject:
		c, err := d.classDesc()
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, corruptf("object without class")
		}
		o := &jObject{class: c, fields: map[string]any{}}
		d.newHandle(o)
		if err := d.classData(o, c); err != nil {
			return nil, err
		}
		return o, nil
	case tcEnum:
		c, err := d.classDesc()
		if err != nil {
			return nil, err
		}
		e := &jEnum{class: c}
		d.newHandle(e)
		v, err := d.content()
		if err != nil {
			return nil, err
		}
		s, ok := v.(string)
		if !ok {
			return nil, corruptf("enum constant is %T", v)
		}
		e.name = s
		return e, nil
	case tcArray:
		c, err := d.classDesc()
		if err != nil {
			return nil, err
		}
		if c == nil || len(c.name) < 2 || c.name[0] != '[' {
			return nil, corruptf("array of a non-array class")
		}
		a := &jArray{class: c}
		d.newHandle(a)
		n, err := d.u32()
		if err != nil {
			return nil, err
		}
		if int64(n) > int64(len(d.b)-d.pos) {
			return nil, corruptf("array of %d elements", n)
		}
		for i := uint32(0); i < n; i++ {
			v, err := d.value(c.name[1])
			if err != nil {
				return nil, err
			}
			a.values = append(a.values, v)
		}
		return a, nil
	case tcClass:
		c, err := d.classDesc()
		if err != nil {
			return nil, err
		}
		d.newHandle(c)
		return c, nil
	case tcBlockData:
		n, err := d.u8()
		if err != nil {
			return nil, err
		}
		return d.need(int(n))
	case tcBlockDataLong:
		n, err := d.u32()
		if err != nil {
			return nil, err
		}
		if n > math.MaxInt32 {
			return nil, corruptf("block data of %d bytes", n)
		}
		return d.need(int(n))
	}
	return nil, corruptf("type code %#x at %d is not supported", tc, d.pos-1)
}

// classDesc reads a class descriptor, a reference to one, or null.
func (d *javaDecoder) classDesc() (*jClass, error) {
	v, err := d.content()
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	c, ok := v.(*jClass)
	if !ok {
		return nil, corruptf("class descriptor expected, got %T", v)
	}
	return c, nil
}

func (d *javaDecoder) classDescBody() (*jClass, error) {
	name, err := d.utf(false)
	if err != nil {
		return nil, err
	}
	suid, err := d.u64()
	if err != nil {
		return nil, err
	}
	c := &jClass{name: name, suid: int64(suid)}
	d.newHandle(c)
	if c.flags, err = d.u8(); err != nil {
		return nil, err
	}
	if c.flags&scExternalizable != 0 {
		return nil, corruptf("externalizable class %s is not supported", name)
	}
	n, err := d.u16()
	if err != nil {
		return nil, err
	}
	for i := 0; i < int(n); i++ {
		var f jField
		if f.typ, err = d.u8(); err != nil {
			return nil, err
		}
		if f.name, err = d.utf(false); err != nil {
			return nil, err
		}
		switch f.typ {
		case 'B', 'C', 'D', 'F', 'I', 'J', 'S', 'Z':
		case 'L', '[':
			v, err := d.content()
			if err != nil {
				return nil, err
			}
			s, ok := v.(string)
			if !ok {
				return nil, corruptf("field %s type is %T", f.name, v)
			}
			f.class = s
		default:
			return nil, corruptf("field %s of type %q", f.name, f.typ)
		}
		c.fields = append(c.fields, f)
	}
	if err := d.annotation(nil); err != nil {
		return nil, err
	}
	if c.super, err = d.classDesc(); err != nil {
		return nil, err
	}
	return c, nil
}

// annotation reads contents up to TC_ENDBLOCKDATA, appending them to *out
// when out is not nil.
func (d *javaDecoder) annotation(out *[]any) error {
	for {
		if d.pos < len(d.b) && d.b[d.pos] == tcEndBlockData {
			d.pos++
			return nil
		}
		v, err := d.content()
		if err != nil {
			return err
		}
		if out != nil {
			*out = append(*out, v)
		}
	}
}

func (d *javaDecoder) classData(o *jObject, c *jClass) error {
	var chain []*jClass
	for k := c; k != nil; k = k.super {
		chain = append(chain, k)
		if len(chain) > maxJavaDepth {
			return corruptf("class chain longer than %d", maxJavaDepth)
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		k := chain[i]
		for _, f := range k.fields {
			v, err := d.value(f.typ)
			if err != nil {
				return err
			}
			o.fields[f.name] = v
		}
		if k.flags&scWriteMethod != 0 {
			if err := d.annotation(&o.annot); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *javaDecoder) value(typ byte) (any, error) {
	switch typ {
	case 'B':
		v, err := d.u8()
		return int8(v), err
	case 'Z':
		v, err := d.u8()
		return v != 0, err
	case 'C':
		v, err := d.u16()
		return v, err
	case 'S':
		v, err := d.u16()
		return int16(v), err
	case 'I':
		v, err := d.u32()
		return int32(v), err
	case 'F':
		v, err := d.u32()
		return math.Float32frombits(v), err
	case 'J':
		v, err := d.u64()
		return int64(v), err
	case 'D':
		v, err := d.u64()
		return math.Float64frombits(v), err
	case 'L', '[':
		return d.content()
	}
	return nil, corruptf("value of type %q", typ)
}

// javaEncoder writes objects as ObjectOutputStream does, for the classes
// it is given; it shares class descriptors and type strings by value and
// value strings only where the caller asks (Java shares by identity).
type javaEncoder struct {
	b       []byte
	next    int
	classes map[string]int
	types   map[string]int
	shared  map[string]int
}

func newJavaEncoder() *javaEncoder {
	return &javaEncoder{
		b:       []byte{0xac, 0xed, 0, 5},
		classes: map[string]int{},
		types:   map[string]int{},
		shared:  map[string]int{},
	}
}

func (e *javaEncoder) handle() int {
	h := e.next
	e.next++
	return h
}

func (e *javaEncoder) ref(h int) {
	e.b = append(e.b, tcReference)
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(baseHandle+h))
}

func (e *javaEncoder) utf(s string) {
	enc := modifiedUTF8(s)
	e.b = binary.BigEndian.AppendUint16(e.b, uint16(len(enc)))
	e.b = append(e.b, enc...)
}

// str writes a new string object.
func (e *javaEncoder) str(s string) {
	if len(modifiedUTF8(s)) > 0xffff {
		enc := modifiedUTF8(s)
		e.b = append(e.b, tcLongString)
		e.b = binary.BigEndian.AppendUint64(e.b, uint64(len(enc)))
		e.b = append(e.b, enc...)
		e.handle()
		return
	}
	e.b = append(e.b, tcString)
	e.utf(s)
	e.handle()
}

// sharedStr writes s once and back references after, as Java does for
// one String object written several times.
func (e *javaEncoder) sharedStr(s string) {
	if h, ok := e.shared[s]; ok {
		e.ref(h)
		return
	}
	e.shared[s] = e.next
	e.str(s)
}

func (e *javaEncoder) classDesc(c *jClass) {
	if c == nil {
		e.b = append(e.b, tcNull)
		return
	}
	if h, ok := e.classes[c.name]; ok {
		e.ref(h)
		return
	}
	e.b = append(e.b, tcClassDesc)
	e.utf(c.name)
	e.b = binary.BigEndian.AppendUint64(e.b, uint64(c.suid))
	e.classes[c.name] = e.handle()
	e.b = append(e.b, c.flags)
	e.b = binary.BigEndian.AppendUint16(e.b, uint16(len(c.fields)))
	for _, f := range c.fields {
		e.b = append(e.b, f.typ)
		e.utf(f.name)
		if f.typ == 'L' || f.typ == '[' {
			if h, ok := e.types[f.class]; ok {
				e.ref(h)
			} else {
				e.types[f.class] = e.next
				e.str(f.class)
			}
		}
	}
	e.b = append(e.b, tcEndBlockData)
	e.classDesc(c.super)
}

// object starts an object of class c; the caller writes its field values
// (and writeObject data) next.
func (e *javaEncoder) object(c *jClass) {
	e.b = append(e.b, tcObject)
	e.classDesc(c)
	e.handle()
}

func (e *javaEncoder) enum(c *jClass, name string) {
	e.b = append(e.b, tcEnum)
	e.classDesc(c)
	e.handle()
	e.str(name)
}

func (e *javaEncoder) null()       { e.b = append(e.b, tcNull) }
func (e *javaEncoder) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *javaEncoder) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *javaEncoder) f32(v float32) {
	e.b = binary.BigEndian.AppendUint32(e.b, math.Float32bits(v))
}

// block writes block data (writeObject's primitive writes).
func (e *javaEncoder) block(p []byte) {
	if len(p) > 255 {
		e.b = append(e.b, tcBlockDataLong)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(p)))
	} else {
		e.b = append(e.b, tcBlockData, byte(len(p)))
	}
	e.b = append(e.b, p...)
}

func (e *javaEncoder) end() { e.b = append(e.b, tcEndBlockData) }

func (c *jClass) String() string { return fmt.Sprintf("%s(%#x)", c.name, c.suid) }
