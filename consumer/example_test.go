package consumer_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sluicemq/sluice/consumer"
)

var errTemporary = errors.New("temporary")

func Example() {
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:9324"),
		Credentials: credentials.NewStaticCredentialsProvider("key", "secret", "")})
	c, err := consumer.New(client, "http://127.0.0.1:9324/000000000000/orders", func(ctx context.Context, m *consumer.Message) error {
		switch {
		case m.Body == "":
			return consumer.Permanent(errors.New("empty order")) // to the dead-letter queue
		case m.RetryLevel > 2:
			return consumer.Defer(time.Minute) // later, not a failure
		}
		return nil // done: deleted
	}, consumer.Options{Concurrency: 32, TenantConcurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = c.Run(ctx) // receives until ctx ends, then shuts down gracefully
}
