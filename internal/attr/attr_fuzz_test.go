package attr

import (
	"sort"
	"testing"

	"github.com/sluicemq/sluice/internal/record"
)

// FuzzQueueAttributes: any value of any settable attribute is accepted or
// refused with an error, and what is accepted configures a queue without
// a panic.
func FuzzQueueAttributes(f *testing.F) {
	var names []string
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	for i := range names {
		f.Add(uint8(i), "1")
	}
	for _, v := range []string{"1s,10s,1m", "MessageAttribute:x", "0.5", "NaN", "-1", "1e309", "999999999999", ",", "1h,", "true"} {
		f.Add(uint8(0), v)
	}
	f.Fuzz(func(t *testing.T, i uint8, v string) {
		name := names[int(i)%len(names)]
		for _, fifo := range []bool{false, true} {
			clean, err := Validate(map[string]string{name: v}, fifo, true)
			if err != nil {
				continue
			}
			Parse(&record.QueueMeta{Attrs: clean, FIFO: fifo})
		}
	})
}
