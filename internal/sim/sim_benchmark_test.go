package sim

import (
	"context"
	"testing"

	"github.com/sluicemq/sluice/examples/scenarios"
)

// BenchmarkConsumerOutage runs the shipped consumer-outage scenario (2h30m
// simulated, about 180,000 messages) and reports messages simulated per
// second of wall time.
func BenchmarkConsumerOutage(b *testing.B) {
	all, err := Load(scenarios.FS(), "consumer-outage")
	if err != nil {
		b.Fatal(err)
	}
	sc := all.Expand()[1] // fair
	var msgs int64
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(context.Background(), sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		msgs += res.Messages
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}
