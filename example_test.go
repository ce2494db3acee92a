package sluice_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sluicemq/sluice"
	"github.com/sluicemq/sluice/sluicetype"
)

// An embedder opens a broker on a data directory, and sends, receives and
// deletes through it.
func Example() {
	ctx := context.Background()
	b, err := sluice.Open(sluice.Config{InMemory: true}) // Dir: "data" keeps them on disk
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateQueue(ctx, "orders", map[string]string{"VisibilityTimeout": "60"}, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := b.Send(ctx, "orders", sluicetype.SendInput{Body: "order 1", GroupID: "tenant-a"}); err != nil {
		log.Fatal(err)
	}
	msgs, err := b.Receive(ctx, "orders", sluicetype.ReceiveInput{MaxMessages: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Println(m.Body)
		if err := b.Delete(ctx, "orders", m.ReceiptHandle); err != nil {
			log.Fatal(err)
		}
	}
	n, _ := b.GetQueueAttributes("orders", []string{"ApproximateNumberOfMessages"})
	fmt.Println(n["ApproximateNumberOfMessages"], "left")
	// Output:
	// order 1
	// 0 left
}
