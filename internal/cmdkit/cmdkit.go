// Package cmdkit is what the sluice command's packages share: the
// environment a command runs with, flag parsing that takes flags after
// positional arguments, an SQS client from the environment's credentials,
// and aligned or JSON output.
package cmdkit

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Env is what a command runs with.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment (os.Getenv by default).
	Getenv func(string) string
}

// ParseFlags parses flags that may come after positional arguments.
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// NewSQS returns an SDK client for the endpoint. Credentials come from
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, or
// placeholders when the server runs without authentication.
func NewSQS(endpoint, region string, env Env) *awssqs.Client {
	key, secret := env.Getenv("AWS_ACCESS_KEY_ID"), env.Getenv("AWS_SECRET_ACCESS_KEY")
	if key == "" {
		key, secret = "sluice", "sluice"
	}
	return awssqs.New(awssqs.Options{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(key, secret, env.Getenv("AWS_SESSION_TOKEN")),
	})
}

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Table prints rows under a header, aligned.
func Table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}
