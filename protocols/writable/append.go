package writable

// AppendText appends s as org.apache.hadoop.io.Text writes it: a VInt byte
// length, then the bytes. s is written as is; Hadoop expects UTF-8.
func AppendText(dst []byte, s string) []byte {
	dst = AppendVLong(dst, int64(len(s)))
	return append(dst, s...)
}

// AppendBytes appends b with a VInt length prefix, the layout of a Token's
// identifier and password and of a Credentials secret.
func AppendBytes(dst, b []byte) []byte {
	dst = AppendVLong(dst, int64(len(b)))
	return append(dst, b...)
}
