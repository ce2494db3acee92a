package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"github.com/sluicemq/sluice/internal/store"
	st "github.com/sluicemq/sluice/sluicetype"
)

// Version is the codec version written. Records of an unknown version are
// refused, never guessed at (versions 1 to 3 were the single-log format of
// releases before partitions).
const Version = 16

// ErrShort is a record cut short or with a field out of range.
var ErrShort = errors.New("record: truncated or malformed")

type enc struct{ b []byte }

func (e *enc) u(v uint64)     { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i(v int64)      { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(v string)   { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) bytes(v []byte) { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) byte1(v uint8)  { e.b = append(e.b, v) }
func (e *enc) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// Encode encodes r. A Send whose payload was encoded already (Raw) has
// its header written into the room EncodePayload left before the payload:
// the result shares Raw's storage, and the payload is not copied again.
// Encode such a record once.
func Encode(r *Record) []byte {
	if r.Type == Send && r.Raw.buf != nil {
		// The header is written at the start of the room (capped, so it
		// cannot run into the payload: one too long is written elsewhere)
		// and moved up against the payload. A buffer of its own would
		// escape (enc's appends go through a pointer): an allocation for
		// every message sent.
		e := &enc{b: append(r.Raw.buf[:0:rawRoom], Version, byte(Send))}
		encodeMsg(e, r.Msg)
		if n := len(e.b); n <= rawRoom {
			copy(r.Raw.buf[rawRoom-n:], e.b) // copy handles the overlap
			return r.Raw.buf[rawRoom-n:]
		}
	}
	size := 32 + len(r.Raw.payload()) + 64*len(r.Msgs)
	if r.Payload != nil && r.Raw.buf == nil {
		size += len(r.Payload.Body) + 160
	}
	return Append(make([]byte, 0, size), r)
}

// Append appends r's encoding to b.
func Append(b []byte, r *Record) []byte {
	if r.Type == 0 || r.Type >= maxType {
		panic(fmt.Sprintf("record: encoding a record of type %d", r.Type)) // a programming error
	}
	e := &enc{b: append(b, Version, byte(r.Type))}
	switch r.Type {
	case Meta:
		raw, err := json.Marshal(r.Meta)
		if err != nil {
			panic(fmt.Sprintf("record: encoding queue metadata: %v", err)) // plain data: cannot fail
		}
		e.bytes(raw)
	case Send:
		encodeMsg(e, r.Msg)
		if r.Raw.buf != nil {
			e.b = append(e.b, r.Raw.payload()...)
		} else {
			encodePayload(e, r.Payload)
		}
	case Index:
		e.u(uint64(len(r.Msgs)))
		for i := range r.Msgs {
			encodeMsg(e, &r.Msgs[i])
		}
	case Receive:
		e.u(r.Seq)
		e.u(uint64(r.Count))
		e.i(r.First)
		e.i(r.Last)
		e.i(r.VisibleAt)
		e.u(uint64(r.Fence))
		e.byte1(r.Level)
		if r.Fail != nil {
			encodeFail(e, r.Fail)
		}
	case Visibility:
		e.u(r.Seq)
		e.i(r.VisibleAt)
	case Delete:
		e.u(r.Seq)
		e.byte1(r.Reason)
	case Purge:
		e.i(r.Until)
	case Update:
		e.u(r.Seq)
		encodeMsg(e, r.Msg)
	case Dedup:
		e.str(r.Key)
		e.str(r.ID)
		e.str(r.SeqNum)
		e.i(r.Until)
	case State:
		e.u(r.NextSeqNum)
		e.i(r.Until)
		if r.Number != 0 { // a topic's: its last publish number
			e.u(r.Number)
		}
	case Create:
		e.u(r.Partition)
		e.str(r.Name)
	case Drop:
		e.u(r.Partition)
		if r.Name != "" {
			e.str(r.Name)
			e.i(r.Until)
		}
	case Catalog:
		e.u(r.NextPartition)
	case OriginMark:
		e.u(r.Partition)
		e.u(r.OriginPos)
	case Epoch:
		e.str(r.Node)
		e.u(r.Term)
	case Entered:
		e.str(r.Key)
		e.i(r.Until)
	case Task:
		encodeTask(e, r.Task)
	case TopicCreate, TopicDrop:
		e.u(r.Partition)
		e.str(r.Name)
	case TopicMeta:
		raw, err := json.Marshal(r.Topic)
		if err != nil {
			panic(fmt.Sprintf("record: encoding topic metadata: %v", err)) // plain data: cannot fail
		}
		e.bytes(raw)
	case Publish:
		e.u(r.Number)
		encodePayload(e, r.Payload)
		e.str(r.Subject)
		e.str(r.Group)
		e.i(r.Published)
		if r.JSON {
			e.byte1(1)
		} else {
			e.byte1(0)
		}
	}
	return e.b
}

func encodeTask(e *enc, t *MoveTask) {
	if t == nil {
		t = &MoveTask{}
	}
	e.str(t.Handle)
	e.str(t.Source)
	e.str(t.Destination)
	e.u(uint64(t.Rate))
	e.byte1(uint8(t.Status))
	e.i(t.Started)
	e.i(t.Ended)
	e.i(t.ToMove)
	e.i(t.Moved)
	e.str(t.Failure)
	e.u(t.Bound)
	e.flag(t.Filter != nil)
	if f := t.Filter; f != nil {
		e.str(f.Tenant)
		e.str(f.Source)
		e.str(f.Reason)
		e.i(f.Since)
		e.i(f.Until)
	}
	e.u(uint64(len(t.Allowed)))
	for _, a := range t.Allowed {
		e.str(a)
	}
}

func decodeTask(d *dec) *MoveTask {
	t := &MoveTask{Handle: d.str(), Source: d.str(), Destination: d.str()}
	rate := d.u()
	if rate > math.MaxInt32 {
		d.err = ErrShort
	}
	t.Rate = int32(rate)
	t.Status = TaskStatus(d.byte1())
	t.Started, t.Ended, t.ToMove, t.Moved = d.i(), d.i(), d.i(), d.i()
	t.Failure = d.str()
	t.Bound = d.u()
	if d.flag() {
		t.Filter = &TaskFilter{Tenant: d.str(), Source: d.str(), Reason: d.str(), Since: d.i(), Until: d.i()}
	}
	n := d.u()
	if n > uint64(len(d.b)) { // each takes a byte at least
		d.err = ErrShort
		return t
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		t.Allowed = append(t.Allowed, d.str())
	}
	return t
}

func encodeMsg(e *enc, m *Msg) {
	if m == nil {
		m = &Msg{}
	}
	e.u(m.Seq)
	e.i(m.Sent)
	e.i(m.VisibleAt)
	e.str(m.Group)
	e.str(m.Tenant)
	e.str(m.DLQSource)
	e.u(uint64(m.Count))
	e.i(m.First)
	e.i(m.Last)
	e.u(uint64(m.Fence))
	e.byte1(m.State)
	e.byte1(m.Level)
	e.flag(m.Fail != nil)
	if m.Fail != nil {
		encodeFail(e, m.Fail)
	}
	for _, v := range []uint32{m.Hint.A, m.Hint.B, m.Hint.C, m.Hint.D} {
		e.u(uint64(v))
	}
}

func encodeFail(e *enc, f *Fail) {
	e.str(f.Reason)
	e.str(f.LastError)
	e.i(f.First)
	e.u(uint64(f.Failures))
}

// rawRoom is the room EncodePayload leaves before a payload for its Send
// record's header (version, type, the index entry: about 30 bytes, more
// with long group, tenant or dead-letter source names; a header that does
// not fit is written the ordinary way).
const rawRoom = 128

// RawPayload is a Send's payload encoded before the queue's lock is taken
// (EncodePayload), with room before it for the record's header.
type RawPayload struct{ buf []byte }

func (r RawPayload) payload() []byte {
	if r.buf == nil {
		return nil
	}
	return r.buf[rawRoom:]
}

// EncodePayload encodes a payload on its own (so a sender can do it before
// taking a queue's lock); a Send record's Raw carries it to Encode.
func EncodePayload(p *Payload) RawPayload {
	e := &enc{b: make([]byte, rawRoom, rawRoom+len(p.Body)+160)}
	encodePayload(e, p)
	return RawPayload{buf: e.b}
}

func encodePayload(e *enc, p *Payload) {
	if p == nil {
		p = &Payload{}
	}
	for _, s := range []string{p.ID, p.Body, p.Trace, p.Sender, p.Dedup, p.SeqNum, p.TraceParent, p.MD5} {
		e.str(s)
	}
	names := make([]string, 0, len(p.Attrs))
	for n := range p.Attrs {
		names = append(names, n)
	}
	sort.Strings(names) // the same payload always encodes the same
	e.u(uint64(len(names)))
	for _, name := range names {
		a := p.Attrs[name]
		e.str(name)
		e.str(a.DataType)
		e.flag(a.StringValue != nil)
		if a.StringValue != nil {
			e.str(*a.StringValue)
		}
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

type dec struct {
	b   []byte
	err error
	// skip: strings are read past, not copied (str returns "").
	skip bool
}

func (d *dec) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) u32() uint32 {
	v := d.u()
	if v > math.MaxUint32 {
		d.err = ErrShort
	}
	return uint32(v)
}

func (d *dec) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = ErrShort
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
		d.err = ErrShort
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string {
	if b := d.raw(); !d.skip {
		return string(b)
	}
	return ""
}

func (d *dec) byte1() uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = ErrShort
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) flag() bool { return d.byte1() == 1 }

// Decode decodes a record. With body false, a Send's payload keeps its
// small fields (ids, deduplication) but not its body and attributes
// (recovery needs only those).
func Decode(b []byte, body bool) (*Record, error) {
	if len(b) < 2 {
		return nil, ErrShort
	}
	if b[0] != Version {
		return nil, fmt.Errorf("record: codec version %d is not supported by this build (data written by another release?)", b[0])
	}
	r := &Record{Type: Type(b[1])}
	if r.Type == 0 || r.Type >= maxType {
		return nil, fmt.Errorf("record: unknown type %d", b[1])
	}
	d := &dec{b: b[2:]}
	switch r.Type {
	case Meta:
		raw := d.raw()
		if d.err == nil {
			r.Meta = &QueueMeta{}
			if err := json.Unmarshal(raw, r.Meta); err != nil {
				return nil, fmt.Errorf("record: queue metadata: %w", err)
			}
		}
	case Send:
		r.Msg = decodeMsg(d)
		r.Payload = decodePayload(d, body)
	case Index:
		n := d.u()
		if n > IndexChunk {
			d.err = ErrShort
			break
		}
		r.Msgs = make([]Msg, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			r.Msgs = append(r.Msgs, *decodeMsg(d))
		}
	case Receive:
		r.Seq = d.u()
		c := d.u()
		if c > math.MaxInt32 {
			d.err = ErrShort
		}
		r.Count = int32(c)
		r.First, r.Last, r.VisibleAt = d.i(), d.i(), d.i()
		r.Fence = d.u32()
		r.Level = d.byte1()
		if len(d.b) > 0 { // since deliveries carry their failures
			r.Fail = decodeFail(d)
		}
	case Visibility:
		r.Seq, r.VisibleAt = d.u(), d.i()
	case Delete:
		r.Seq, r.Reason = d.u(), d.byte1()
	case Purge:
		if len(d.b) > 0 { // since purges outlive restarts
			r.Until = d.i()
		}
	case Update:
		r.Seq = d.u()
		r.Msg = decodeMsg(d)
	case Dedup:
		r.Key, r.ID, r.SeqNum, r.Until = d.str(), d.str(), d.str(), d.i()
	case State:
		r.NextSeqNum = d.u()
		if len(d.b) > 0 { // since purges outlive restarts
			r.Until = d.i()
		}
		if len(d.b) > 0 { // a topic's
			r.Number = d.u()
		}
	case Create:
		r.Partition, r.Name = d.u(), d.str()
	case Drop:
		r.Partition = d.u()
		if len(d.b) > 0 { // since the catalog remembers deleted names
			r.Name, r.Until = d.str(), d.i()
		}
	case Catalog:
		r.NextPartition = d.u()
	case OriginMark:
		r.Partition, r.OriginPos = d.u(), d.u()
	case Epoch:
		r.Node, r.Term = d.str(), d.u()
	case Entered:
		r.Key, r.Until = d.str(), d.i()
	case Task:
		r.Task = decodeTask(d)
	case TopicCreate, TopicDrop:
		r.Partition, r.Name = d.u(), d.str()
	case TopicMeta:
		raw := d.raw()
		if d.err == nil {
			r.Topic = &TopicInfo{}
			if err := json.Unmarshal(raw, r.Topic); err != nil {
				return nil, fmt.Errorf("record: topic metadata: %w", err)
			}
		}
	case Publish:
		r.Number = d.u()
		r.Payload = decodePayload(d, true)
		r.Subject, r.Group, r.Published = d.str(), d.str(), d.i()
		r.JSON = d.byte1() == 1
	}
	if d.err != nil {
		return nil, fmt.Errorf("record: %s: %w", r.Type, d.err)
	}
	if len(d.b) != 0 && (r.Type != Send || body) {
		return nil, fmt.Errorf("record: %s: trailing bytes", r.Type)
	}
	return r, nil
}

// DecodeIndex reads an Index record of a damaged snapshot as far as it
// reads (a salvage): the entries before the first that does not decode,
// and how many the record held: its count, or the entries read when the
// count is what was damaged. ok is false
// when the record is not an Index record or neither can be told. An entry
// read may be damaged itself (it names another message): the caller
// checks each against the message's own Send record.
func DecodeIndex(b []byte) (msgs []Msg, n int, ok bool) {
	if len(b) < 2 || b[0] != Version || Type(b[1]) != Index {
		return nil, 0, false
	}
	d := &dec{b: b[2:]}
	count := d.u()
	if d.err != nil {
		return nil, 0, false
	}
	for len(d.b) > 0 && len(msgs) <= IndexChunk {
		var m Msg
		decodeMsgInto(d, &m)
		if d.err != nil {
			break
		}
		msgs = append(msgs, m)
	}
	// The count was what was damaged when the entries read cleanly to the
	// end in a number it misses by one bit (or out of range): entries
	// that lost their step (a damaged length) can also read to the end,
	// in a number that is anything.
	clean := d.err == nil && len(d.b) == 0 && len(msgs) <= IndexChunk
	k := uint64(len(msgs))
	switch {
	case clean && k != count && (count > IndexChunk || bits.OnesCount64(count^k) == 1):
		return msgs, len(msgs), true
	case count <= IndexChunk:
		return msgs[:min(len(msgs), int(count))], int(count), true
	}
	return nil, 0, false
}

func decodeMsg(d *dec) *Msg {
	m := &Msg{}
	decodeMsgInto(d, m)
	return m
}

func decodeMsgInto(d *dec, m *Msg) {
	*m = Msg{Seq: d.u(), Sent: d.i(), VisibleAt: d.i(), Group: d.str(), Tenant: d.str(), DLQSource: d.str()}
	c := d.u()
	if c > math.MaxInt32 {
		d.err = ErrShort
	}
	m.Count = int32(c)
	m.First, m.Last = d.i(), d.i()
	m.Fence = d.u32()
	m.State, m.Level = d.byte1(), d.byte1()
	if d.flag() {
		m.Fail = decodeFail(d)
	}
	m.Hint = store.Hint{A: d.u32(), B: d.u32(), C: d.u32(), D: d.u32()}
}

func decodeFail(d *dec) *Fail {
	f := &Fail{Reason: d.str(), LastError: d.str(), First: d.i()}
	n := d.u()
	if n > math.MaxInt32 {
		d.err = ErrShort
	}
	f.Failures = int32(n)
	return f
}

func decodePayload(d *dec, body bool) *Payload {
	// The short fields are copied out together, into one string each of
	// them is a part of: every receive decodes a payload per message, and
	// a string each was four allocations. The body stays a string of its
	// own, so that a short field kept does not keep it.
	var short [7][]byte // ID, then Trace, Sender, Dedup, SeqNum, TraceParent, MD5
	short[0] = d.raw()
	bodyRaw := d.raw() // not copied without body
	for i := 1; i < len(short); i++ {
		short[i] = d.raw()
	}
	var s [len(short)]string
	if !d.skip {
		copyStrings(s[:], short[:])
	}
	p := &Payload{ID: s[0], Trace: s[1], Sender: s[2], Dedup: s[3], SeqNum: s[4], TraceParent: s[5], MD5: s[6]}
	if !body {
		return p
	}
	if !d.skip {
		p.Body = string(bodyRaw)
	}
	n := d.u()
	if n > 10 {
		d.err = ErrShort
		return p
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		if p.Attrs == nil {
			p.Attrs = map[string]st.AttributeValue{}
		}
		name := d.str()
		a := st.AttributeValue{DataType: d.str()}
		if d.flag() {
			s := d.str()
			a.StringValue = &s
		}
		if d.flag() {
			a.BinaryValue = append([]byte{}, d.raw()...)
		}
		for k := d.u(); k > 0 && d.err == nil; k-- {
			a.StringListValues = append(a.StringListValues, d.str())
		}
		for k := d.u(); k > 0 && d.err == nil; k-- {
			a.BinaryListValues = append(a.BinaryListValues, append([]byte{}, d.raw()...))
		}
		p.Attrs[name] = a
	}
	return p
}

// copyStrings sets ss[i] to string(bs[i]), with one allocation for all.
func copyStrings(ss []string, bs [][]byte) {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	if n == 0 {
		return
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, b := range bs {
		sb.Write(b)
	}
	all := sb.String()
	for i, b := range bs {
		if len(b) > 0 { // an empty one is "", not a part of all that would keep it
			ss[i] = all[:len(b)]
		}
		all = all[len(b):]
	}
}

// ReadPayload reads back from s the payload of the message whose Send is
// at position pos of partition p (h: where the store said it was).
func ReadPayload(s store.Store, p store.PartitionID, pos uint64, h store.Hint) (*Payload, error) {
	raw, err := s.Read(p, pos, h)
	if err != nil {
		return nil, err
	}
	if len(raw) < 2 || raw[0] != Version || Type(raw[1]) != Send {
		r, err := Decode(raw, false) // says what is wrong with it
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("record: the record at %d:%d is a %s, not a message's send", p, pos, r.Type)
	}
	// Only the payload: the index entry before it is read past, not kept
	// (a receive reads one per message).
	d := dec{b: raw[2:], skip: true}
	var m Msg
	decodeMsgInto(&d, &m)
	d.skip = false
	pl := decodePayload(&d, true)
	if d.err != nil {
		return nil, fmt.Errorf("record: %s: %w", Send, d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("record: %s: trailing bytes", Send)
	}
	return pl, nil
}
