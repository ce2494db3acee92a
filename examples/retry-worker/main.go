// Command retry-worker is a worker with a retry ladder: the queue retries
// a failed message after 1 s, 10 s and 1 min, then moves it to a
// dead-letter queue with its reason, where `sluice dlq peek` shows it.
//
//	go run ./cmd/sluice serve &
//	go run ./examples/retry-worker --endpoint http://127.0.0.1:9324
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sluicemq/sluice/consumer"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:9324", "Sluice (or SQS) endpoint")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(*endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("example", "example", "")})
	dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("payments-dlq")})
	if err != nil {
		log.Fatal(err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{"QueueArn"}})
	if err != nil {
		log.Fatal(err)
	}
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("payments"), Attributes: map[string]string{
		"RetryDelays":       "1s,10s,1m",
		"VisibilityTimeout": "30",
		"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":10}`, attrs.Attributes["QueueArn"]),
	}})
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(fmt.Sprintf("payment-%d", i))}); err != nil {
			log.Fatal(err)
		}
	}
	c, err := consumer.New(client, *q.QueueUrl, func(ctx context.Context, m *consumer.Message) error {
		switch r := rand.IntN(10); {
		case r == 0:
			return consumer.Permanent(errors.New("card declined")) // straight to the dead-letter queue
		case r < 4:
			return errors.New("bank timeout") // retryable: up the ladder
		}
		log.Printf("%s paid (attempt %d, retry level %d)", m.Body, m.ReceiveCount, m.RetryLevel)
		return nil
	}, consumer.Options{Concurrency: 8, OnFinish: func(m *consumer.Message, o consumer.Outcome, d time.Duration, err error) {
		if err != nil {
			log.Printf("%s: %s (%v)", m.Body, o, err)
		}
	}})
	if err != nil {
		log.Fatal(err)
	}
	log.Print("working; Ctrl-C to stop")
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
