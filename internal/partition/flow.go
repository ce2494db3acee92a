package partition

import (
	"context"
	"time"

	"github.com/sluicemq/sluice/internal/partition/flow"
)

// Flow control's settings (internal/partition/flow): sends wait once 1,000
// messages are ready and consumers took one in the last second, each at
// most 100 ms.
const (
	flowFloor  = 1000
	flowHold   = 100 * time.Millisecond
	flowActive = time.Second
)

// setFlowLocked applies the queue's FlowControl setting.
func (o *Owner) setFlowLocked() {
	if !o.h.FlowControl || !o.cfg.FlowControl {
		o.flow.Drop()
		o.flow.Floor = 0
		return
	}
	o.flow.Floor, o.flow.Active = flowFloor, flowActive
}

// holdSend waits while the queue's flow control holds a send back: until
// consumers' takes admit it, its hold (flowHold) runs out, its caller
// gives up, or the owner stops serving. Then the send goes ahead.
func (o *Owner) holdSend(ctx context.Context, w *flow.Waiter) {
	o.ctr.SendsHeld.Add(1)
	t0 := o.h.Clock.Now()
	defer func() { o.ctr.HeldMillis.Add(o.h.Clock.Now().Sub(t0).Milliseconds()) }()
	timer := make(chan struct{})
	t := o.h.Clock.AfterFunc(flowHold, func() { close(timer) })
	defer t.Stop()
	select {
	case <-w.Admitted():
		return
	case <-timer:
	case <-ctx.Done():
	case <-o.stopped:
	case <-o.h.Closing:
	}
	o.mu.Lock()
	if o.flow.Leave(w) {
		o.ctr.SendsHeldOut.Add(1)
	}
	o.mu.Unlock()
}
