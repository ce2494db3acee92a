package consumer

import (
	"context"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// invokeJSON sends op with body through the client's own stack: it rides
// on a ChangeMessageVisibility call whose target and body are swapped
// before the request is measured and signed, so the client's endpoint,
// credentials, signing and retries apply. The answer of op has no fields;
// errors come back as the SDK's API errors.
func invokeJSON(ctx context.Context, client *sqs.Client, url, op string, body io.ReadSeeker) error {
	swap := middleware.BuildMiddlewareFunc("SluiceExtension", func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
		if req, ok := in.Request.(*smithyhttp.Request); ok {
			if _, err := body.Seek(0, io.SeekStart); err != nil {
				return middleware.BuildOutput{}, middleware.Metadata{}, err
			}
			req.Header.Set("X-Amz-Target", "AmazonSQS."+op)
			r, err := req.SetStream(body)
			if err != nil {
				return middleware.BuildOutput{}, middleware.Metadata{}, err
			}
			in.Request = r
		}
		return next.HandleBuild(ctx, in)
	})
	_, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("-")},
		func(o *sqs.Options) {
			o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
				return s.Build.Add(swap, middleware.Before)
			})
		})
	return err
}
