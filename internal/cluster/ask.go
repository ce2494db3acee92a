package cluster

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
)

// askWait is how long Ask waits for the nodes' answers.
const askWait = time.Second

// Ask asks every node of the cluster (this one's included) a question on
// its Subjects.Ask subject, and returns the answers that came within a
// second, or as soon as want nodes answered. A node that does not answer
// in time is left out: the caller decides what a missing answer means.
func Ask(ctx context.Context, nc *nats.Conn, s Subjects, question string, data []byte, want int) ([][]byte, error) {
	inbox := nc.NewRespInbox()
	replies := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(s.Ask(question), inbox, data); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	var out [][]byte
	for len(out) < want {
		select {
		case m := <-replies:
			if m.Header.Get("Status") == "503" {
				return out, nil // no responders: nobody serves the question
			}
			out = append(out, m.Data)
		case <-ctx.Done():
			return out, nil
		}
	}
	return out, nil
}

// Answer serves one question of the nodes' Asks: f's answer to the
// question's data, as JSON. The subscription lasts until the caller
// unsubscribes it.
func Answer(nc *nats.Conn, s Subjects, question string, f func(data []byte) any) (*nats.Subscription, error) {
	return nc.Subscribe(s.Ask(question), func(m *nats.Msg) {
		if data, err := json.Marshal(f(m.Data)); err == nil {
			_ = m.Respond(data)
		}
	})
}

// ByName merges the nodes' answers (each a JSON list) into one list by
// name, sorted: what a node that owns a thing says of it (a thing moving
// between owners may come twice; one is kept).
func ByName[T any](answers [][]byte, name func(T) string) []T {
	all := map[string]T{}
	for _, a := range answers {
		var ts []T
		if json.Unmarshal(a, &ts) == nil {
			for _, t := range ts {
				all[name(t)] = t
			}
		}
	}
	out := make([]T, 0, len(all))
	for _, n := range slices.Sorted(maps.Keys(all)) {
		out = append(out, all[n])
	}
	return out
}
