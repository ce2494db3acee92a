package sluice

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/sluicemq/sluice/internal/queue"
	st "github.com/sluicemq/sluice/sluicetype"
)

// The record codec: a compact binary form (a type byte, varints, and
// length-prefixed strings), so that the hot path and recovery do no JSON.
// Queue metadata, rare and nested, is embedded as JSON.

// Version 2 adds the tenant key and retry level to message entries;
// version 3 the MD5 of the body to payloads (so receives need not hash
// it). Versions 1 and 2 are still read (tenant = group, level 0, MD5
// computed when needed).
const codecVersion = 3

var recTypes = []string{recQueue, recQueueDelete, recSend, recReceive, recVisibility, recDelete, recPurge, recMove, recHeader, recDedup, recRelocate, recUpdate}

var errShortRecord = errors.New("record truncated")

type enc struct {
	b []byte
	v byte // codec version written (older ones only in tests)
}

func (e *enc) u(v uint64)     { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i(v int64)      { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte) { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)   { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) optStr(v *string) {
	e.flag(v != nil)
	if v != nil {
		e.str(*v)
	}
}
func (e *enc) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

type dec struct {
	b   []byte
	v   byte // codec version
	err error
}

func (d *dec) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShortRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShortRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) raw() []byte {
	n := d.u()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errShortRecord
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) bytes() []byte {
	v := d.raw()
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

func (d *dec) str() string { return string(d.raw()) }

func (d *dec) flag() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.err = errShortRecord
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v == 1
}

func (d *dec) optStr() *string {
	if !d.flag() {
		return nil
	}
	s := d.str()
	return &s
}

func (r *record) encode() []byte { return r.encodeVersion(codecVersion) }

func (r *record) encodeVersion(v byte) []byte {
	size := 64
	if r.P != nil {
		size += len(r.P.Body) + 128 // the body and the usual strings, in one allocation
	}
	e := &enc{b: make([]byte, 0, size), v: v}
	e.b = append(e.b, v)
	t := -1
	for i, x := range recTypes {
		if x == r.T {
			t = i
		}
	}
	if t < 0 {
		panic(fmt.Sprintf("sluice: unknown record type %q", r.T)) // a programming error
	}
	e.b = append(e.b, byte(t))
	for _, v := range []uint64{r.Q, r.Seq, uint64(r.RC), uint64(r.Fence), r.To, r.UpTo, r.NextQ, r.NextSeq} {
		e.u(v)
	}
	for _, v := range []int64{r.First, r.Dlv, r.Vis} {
		e.i(v)
	}
	e.u(uint64(r.Lvl))
	e.flag(r.Meta != nil)
	if r.Meta != nil {
		raw, err := json.Marshal(r.Meta)
		if err != nil {
			panic(fmt.Sprintf("sluice: encoding queue metadata: %v", err)) // plain data: cannot fail
		}
		e.bytes(raw)
	}
	e.flag(r.M != nil)
	if r.M != nil {
		encodeMsg(e, r.M)
	}
	e.flag(r.P != nil)
	if r.P != nil {
		encodePayload(e, r.P)
	}
	return e.b
}

func encodeMsg(e *enc, m *queue.Msg) {
	e.u(m.Seq)
	e.str(m.Group())
	e.str(m.DLQSource())
	for _, v := range []int64{m.Sent, m.FirstRecv(), m.VisibleAt, m.Delivered()} {
		e.i(v)
	}
	for _, v := range []uint32{uint32(m.RecvCount()), m.Fence(), m.Loc.Seg, m.Loc.Off, m.Loc.FLen, m.Loc.Idx} {
		e.u(uint64(v))
	}
	e.b = append(e.b, byte(m.State))
	if t := m.Tenant(); t == m.Group() {
		e.str("")
	} else {
		e.str(t)
	}
	e.b = append(e.b, m.Level)
	f := m.Fail()
	e.flag(f != nil)
	if f != nil {
		e.str(f.Reason)
		e.str(f.LastError)
		e.i(f.First)
		e.u(uint64(uint32(f.Failures)))
	}
}

func encodePayload(e *enc, p *payload) {
	for _, s := range []string{p.ID, p.Body, p.Trace, p.Sender, p.Dedup, p.SeqNum, p.TraceParent} {
		e.str(s)
	}
	if e.v >= 3 {
		e.str(p.MD5)
	}
	e.u(uint64(len(p.Attrs)))
	for name, a := range p.Attrs {
		e.str(name)
		e.str(a.DataType)
		e.optStr(a.StringValue)
		e.flag(a.BinaryValue != nil)
		if a.BinaryValue != nil {
			e.bytes(a.BinaryValue)
		}
		e.u(uint64(len(a.StringListValues)))
		for _, s := range a.StringListValues {
			e.str(s)
		}
		e.u(uint64(len(a.BinaryListValues)))
		for _, b := range a.BinaryListValues {
			e.bytes(b)
		}
	}
}

func decodeRecord(b []byte) (*record, error) {
	if len(b) < 2 {
		return nil, errShortRecord
	}
	if b[0] < 1 || b[0] > codecVersion {
		return nil, fmt.Errorf("record codec version %d is not supported by this build", b[0])
	}
	if int(b[1]) >= len(recTypes) {
		return nil, fmt.Errorf("unknown record type %d", b[1])
	}
	r := &record{T: recTypes[b[1]]}
	d := &dec{b: b[2:], v: b[0]}
	r.Q, r.Seq = d.u(), d.u()
	r.RC, r.Fence = int(d.u()), uint32(d.u())
	r.To, r.UpTo, r.NextQ, r.NextSeq = d.u(), d.u(), d.u(), d.u()
	r.First, r.Dlv, r.Vis = d.i(), d.i(), d.i()
	if d.v >= 2 {
		r.Lvl = uint8(min(d.u(), 255))
	}
	if d.flag() {
		raw := d.raw()
		if d.err == nil {
			r.Meta = &queueMeta{}
			if err := json.Unmarshal(raw, r.Meta); err != nil {
				return nil, fmt.Errorf("queue metadata: %w", err)
			}
		}
	}
	if d.flag() {
		r.M = decodeMsg(d)
	}
	if d.flag() {
		r.P = decodePayload(d)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, errors.New("trailing bytes in record")
	}
	return r, nil
}

func decodeMsg(d *dec) *queue.Msg {
	m := &queue.Msg{Seq: d.u()}
	m.SetGroup(d.str())
	m.SetDLQSource(d.str())
	var first, delivered int64
	for _, p := range []*int64{&m.Sent, &first, &m.VisibleAt, &delivered} {
		*p = d.i()
	}
	var v [6]uint32
	for i := range v {
		x := d.u()
		if x > math.MaxUint32 {
			d.err = errors.New("field out of range")
		}
		v[i] = uint32(x)
	}
	if v[0] > math.MaxInt32 {
		d.err = errors.New("receive count out of range")
	}
	m.SetDelivery(int32(v[0]), first, delivered, v[1])
	m.Loc = queue.Loc{Seg: v[2], Off: v[3], FLen: v[4], Idx: v[5]}
	if d.err == nil {
		if len(d.b) == 0 {
			d.err = errShortRecord
			return m
		}
		m.State = queue.State(d.b[0])
		d.b = d.b[1:]
	}
	if d.v >= 2 {
		if t := d.str(); t != "" {
			m.SetTenant(t)
		}
		if d.err == nil {
			if len(d.b) == 0 {
				d.err = errShortRecord
				return m
			}
			m.Level = d.b[0]
			d.b = d.b[1:]
		}
		if d.flag() {
			m.SetFail(&queue.FailInfo{Reason: d.str(), LastError: d.str(), First: d.i(), Failures: int32(min(d.u(), math.MaxInt32))})
		}
	}
	return m
}

func decodePayload(d *dec) *payload {
	p := &payload{}
	for _, f := range []*string{&p.ID, &p.Body, &p.Trace, &p.Sender, &p.Dedup, &p.SeqNum} {
		*f = d.str()
	}
	if d.v >= 2 {
		p.TraceParent = d.str()
	}
	if d.v >= 3 {
		p.MD5 = d.str()
	}
	n := d.u()
	if n > 10 {
		d.err = errors.New("too many attributes in record")
		return p
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		if p.Attrs == nil {
			p.Attrs = map[string]st.AttributeValue{}
		}
		name := d.str()
		a := st.AttributeValue{DataType: d.str(), StringValue: d.optStr()}
		if d.flag() {
			a.BinaryValue = d.bytes()
			if a.BinaryValue == nil {
				a.BinaryValue = []byte{}
			}
		}
		for k := d.u(); k > 0 && d.err == nil; k-- {
			a.StringListValues = append(a.StringListValues, d.str())
		}
		for k := d.u(); k > 0 && d.err == nil; k-- {
			a.BinaryListValues = append(a.BinaryListValues, d.bytes())
		}
		p.Attrs[name] = a
	}
	return p
}
