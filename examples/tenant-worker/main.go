// Command tenant-worker serves many tenants from one queue without
// letting a slow one take every worker: at most two handlers per tenant,
// and a tenant whose work keeps timing out is put off (Defer) for a while
// instead of failing, so the others go first.
//
//	go run ./cmd/sluice serve &
//	go run ./examples/tenant-worker --endpoint http://127.0.0.1:9324
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sluicemq/sluice/consumer"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:9324", "Sluice (or SQS) endpoint")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(*endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("example", "example", "")})
	// Fair delivery across tenants (the MessageGroupId), with a cap on
	// each tenant's messages in flight, enforced by the queue itself.
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("reports"), Attributes: map[string]string{
		"FairDelivery": "true", "TenantMaxInFlight": "4",
	}})
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		tenant := []string{"acme", "globex", "slowcorp"}[i%3]
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageGroupId: aws.String(tenant),
			MessageBody: aws.String(fmt.Sprintf("report %d for %s", i, tenant))}); err != nil {
			log.Fatal(err)
		}
	}
	var mu sync.Mutex
	slow := map[string]int{} // timeouts per tenant
	c, err := consumer.New(client, *q.QueueUrl, func(ctx context.Context, m *consumer.Message) error {
		mu.Lock()
		n := slow[m.Tenant]
		mu.Unlock()
		if n >= 3 {
			// Sideline the slow tenant: put its work off without counting
			// a failure, so quicker tenants are served first.
			return consumer.Defer(30 * time.Second)
		}
		work := 50 * time.Millisecond
		if m.Tenant == "slowcorp" {
			work = 2 * time.Second
		}
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		select {
		case <-time.After(work):
			log.Printf("%s done", m.Body)
			return nil
		case <-ctx.Done():
			mu.Lock()
			slow[m.Tenant]++
			mu.Unlock()
			return consumer.Retry(ctx.Err(), 5*time.Second)
		}
	}, consumer.Options{Concurrency: 6, TenantConcurrency: 2})
	if err != nil {
		log.Fatal(err)
	}
	log.Print("working; Ctrl-C to stop")
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
