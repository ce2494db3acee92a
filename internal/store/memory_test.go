package store_test

import (
	"errors"
	"testing"

	"github.com/sluicemq/sluice/internal/store"
	"github.com/sluicemq/sluice/internal/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) *storetest.Harness {
		m := store.NewMemory()
		h := &storetest.Harness{Store: m}
		h.Reopen = func() store.Store {
			m.Close()
			m = m.Reopen()
			h.Store = m
			return m
		}
		h.Fail = func(on bool) {
			if on {
				m.FailAppends(errors.New("injected: no space"))
			} else {
				m.FailAppends(nil)
			}
		}
		return h
	})
}
