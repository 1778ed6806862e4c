// Package etcdgrpc is a minimal etcd v3 client speaking gRPC (HTTP/2 without
// TLS, protobuf encoded by hand) with only what a lock needs: LeaseGrant,
// LeaseRevoke and Txn with a compare, a put or a delete. It is what etcd's
// own Go client sends, without the dependency: the benchmark must not add a
// module to stado's go.mod.
package etcdgrpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Client talks to one etcd member over one HTTP/2 connection.
type Client struct {
	base string
	hc   *http.Client
}

// New returns a client of the member at endpoint (http://host:port).
func New(endpoint string) *Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, Proxy: nil}
	return &Client{base: endpoint, hc: &http.Client{Transport: tr}}
}

// Close drops the connection.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) call(ctx context.Context, method string, msg []byte) ([]byte, error) {
	frame := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	copy(frame[5:], msg)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+method, bytes.NewReader(frame))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	status := resp.Trailer.Get("Grpc-Status")
	if status == "" {
		status = resp.Header.Get("Grpc-Status")
	}
	if status != "0" {
		msg := resp.Trailer.Get("Grpc-Message")
		if msg == "" {
			msg = resp.Header.Get("Grpc-Message")
		}
		return nil, fmt.Errorf("etcd %s: grpc status %q: %s (HTTP %d)", method, status, msg, resp.StatusCode)
	}
	if len(body) < 5 {
		return nil, fmt.Errorf("etcd %s: short response", method)
	}
	n := binary.BigEndian.Uint32(body[1:5])
	if int(n) != len(body)-5 {
		return nil, fmt.Errorf("etcd %s: framing: %d bytes announced, %d sent", method, n, len(body)-5)
	}
	return body[5:], nil
}

// Protobuf encoding, the few shapes needed.

func appendVarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendTag(b []byte, field, wire int) []byte { return appendVarint(b, uint64(field<<3|wire)) }

func appendInt(b []byte, field int, v int64) []byte {
	b = appendTag(b, field, 0)
	return appendVarint(b, uint64(v))
}

func appendBytes(b []byte, field int, v []byte) []byte {
	b = appendTag(b, field, 2)
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

// fields decodes one message level: field number → values (varints as
// uint64, length-delimited as []byte).
func fields(b []byte) (map[int][]any, error) {
	out := map[int][]any{}
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("protobuf: bad tag")
		}
		b = b[n:]
		field, wire := int(tag>>3), int(tag&7)
		switch wire {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return nil, errors.New("protobuf: bad varint")
			}
			b = b[n:]
			out[field] = append(out[field], v)
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, errors.New("protobuf: bad length")
			}
			out[field] = append(out[field], b[n:n+int(l)])
			b = b[n+int(l):]
		case 1:
			if len(b) < 8 {
				return nil, errors.New("protobuf: short fixed64")
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return nil, errors.New("protobuf: short fixed32")
			}
			b = b[4:]
		default:
			return nil, fmt.Errorf("protobuf: wire type %d", wire)
		}
	}
	return out, nil
}

// LeaseGrant grants a lease of ttl seconds and returns its ID.
func (c *Client) LeaseGrant(ctx context.Context, ttl int64) (int64, error) {
	resp, err := c.call(ctx, "/etcdserverpb.Lease/LeaseGrant", appendInt(nil, 1, ttl))
	if err != nil {
		return 0, err
	}
	f, err := fields(resp)
	if err != nil {
		return 0, err
	}
	if e, ok := f[4]; ok && len(e[0].([]byte)) > 0 {
		return 0, fmt.Errorf("etcd lease grant: %s", e[0].([]byte))
	}
	id, ok := f[2]
	if !ok {
		return 0, errors.New("etcd lease grant: no lease ID in the answer")
	}
	return int64(id[0].(uint64)), nil
}

// LeaseRevoke revokes a lease (and deletes every key attached to it).
func (c *Client) LeaseRevoke(ctx context.Context, id int64) error {
	_, err := c.call(ctx, "/etcdserverpb.Lease/LeaseRevoke", appendInt(nil, 1, id))
	return err
}

// Compare targets and results (etcd's rpc.proto).
const (
	targetCreate = 1
	targetValue  = 3
	resultEqual  = 0
)

func compare(target int, key []byte, union []byte) []byte {
	var b []byte
	b = appendInt(b, 1, resultEqual) // explicit, though 0 is the default
	b = appendInt(b, 2, int64(target))
	b = appendBytes(b, 3, key)
	return append(b, union...)
}

// PutIfAbsent writes key=value attached to lease, only if key does not
// exist (a Txn comparing its create revision with 0). It reports whether it
// wrote.
func (c *Client) PutIfAbsent(ctx context.Context, key, value []byte, lease int64) (bool, error) {
	cmp := compare(targetCreate, key, appendInt(nil, 5, 0)) // create_revision = 0
	var put []byte
	put = appendBytes(put, 1, key)
	put = appendBytes(put, 2, value)
	put = appendInt(put, 3, lease)
	op := appendBytes(nil, 2, put) // RequestOp.request_put
	var txn []byte
	txn = appendBytes(txn, 1, cmp)
	txn = appendBytes(txn, 2, op)
	return c.txn(ctx, txn)
}

// DeleteIfValue deletes key only if its value is value (a Txn comparing the
// value). It reports whether it deleted.
func (c *Client) DeleteIfValue(ctx context.Context, key, value []byte) (bool, error) {
	cmp := compare(targetValue, key, appendBytes(nil, 7, value))
	del := appendBytes(nil, 1, key)
	op := appendBytes(nil, 3, del) // RequestOp.request_delete_range
	var txn []byte
	txn = appendBytes(txn, 1, cmp)
	txn = appendBytes(txn, 2, op)
	return c.txn(ctx, txn)
}

func (c *Client) txn(ctx context.Context, msg []byte) (bool, error) {
	resp, err := c.call(ctx, "/etcdserverpb.KV/Txn", msg)
	if err != nil {
		return false, err
	}
	f, err := fields(resp)
	if err != nil {
		return false, err
	}
	if v, ok := f[2]; ok {
		return v[0].(uint64) != 0, nil
	}
	return false, nil
}

// String renders a lease ID as etcdctl does.
func String(id int64) string { return strconv.FormatInt(id, 16) }
