package etcdgrpc

import "testing"

// The hand-written protobuf must decode as etcd would read it.
func TestEncodingRoundTrips(t *testing.T) {
	var put []byte
	put = appendBytes(put, 1, []byte("k"))
	put = appendBytes(put, 2, []byte("v"))
	put = appendInt(put, 3, 0x7fffffffffff)
	f, err := fields(put)
	if err != nil {
		t.Fatal(err)
	}
	if string(f[1][0].([]byte)) != "k" || string(f[2][0].([]byte)) != "v" || f[3][0].(uint64) != 0x7fffffffffff {
		t.Fatalf("fields %v", f)
	}
	cmp := compare(targetCreate, []byte("k"), appendInt(nil, 5, 0))
	f, err = fields(cmp)
	if err != nil {
		t.Fatal(err)
	}
	// result EQUAL and create_revision 0 are sent explicitly.
	if f[1][0].(uint64) != resultEqual || f[2][0].(uint64) != targetCreate || len(f[5]) != 1 || f[5][0].(uint64) != 0 {
		t.Fatalf("compare fields %v", f)
	}
	if _, err := fields([]byte{0x0a, 0x05, 'a'}); err == nil {
		t.Fatal("a truncated message must not decode")
	}
}
