#!/usr/bin/env bash
# Drives Sluice with the AWS CLI (Debian's awscli 2.9 speaks the Query
# protocol). Usage: awscli.sh ENDPOINT
set -euo pipefail
ep=$1
export AWS_ACCESS_KEY_ID=AKIDCLI AWS_SECRET_ACCESS_KEY=secret AWS_DEFAULT_REGION=us-east-1 AWS_PAGER=""
aws() { command "${AWS_CLI:-aws}" --endpoint-url "$ep" --output json "$@"; }
fail() { echo "FAILED: $*"; exit 1; }
aws --version || true

q=$(aws sqs create-queue --queue-name cli-basic --attributes VisibilityTimeout=20 --query QueueUrl --output text)
[[ $q == */000000000000/cli-basic ]] || fail "queue url $q"
aws sqs send-message --queue-url "$q" --message-body $'crlf\r\nbody ünïcode' --message-attributes '{"k":{"DataType":"String","StringValue":"v"}}' > /dev/null
got=$(aws sqs receive-message --queue-url "$q" --attribute-names All --message-attribute-names All)
body=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Messages"][0]["Body"], end="")' <<<"$got")
[[ $body == $'crlf\r\nbody ünïcode' ]] || fail "body round trip: $(printf %q "$body")"
rh=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Messages"][0]["ReceiptHandle"])' <<<"$got")
aws sqs delete-message --queue-url "$q" --receipt-handle "$rh"

out=$(aws sqs send-message-batch --queue-url "$q" --entries 'Id=a,MessageBody=one' 'Id=b,MessageBody=two,DelaySeconds=1000')
python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["Successful"])==1 and d["Failed"][0]["Id"]=="b", d' <<<"$out" || fail "batch partial failure"

f=$(aws sqs create-queue --queue-name cli-jobs.fifo --attributes FifoQueue=true,ContentBasedDeduplication=true --query QueueUrl --output text)
id1=$(aws sqs send-message --queue-url "$f" --message-body same --message-group-id g --query MessageId --output text)
id2=$(aws sqs send-message --queue-url "$f" --message-body same --message-group-id g --query MessageId --output text)
[[ $id1 == "$id2" ]] || fail "fifo dedup"

aws sqs tag-queue --queue-url "$q" --tags team=a,env=ci
aws sqs untag-queue --queue-url "$q" --tag-keys env
tags=$(aws sqs list-queue-tags --queue-url "$q" --query Tags --output json)
python3 -c 'import json,sys; assert json.load(sys.stdin)=={"team":"a"}' <<<"$tags" || fail "tags: $tags"

if aws sqs set-queue-attributes --queue-url "$q" --attributes VisibilityTimeout=99999 2> /tmp/awscli-err.$$; then fail "bad attribute accepted"; fi
grep -q InvalidAttributeValue /tmp/awscli-err.$$ || fail "attribute error: $(cat /tmp/awscli-err.$$)"
rm -f /tmp/awscli-err.$$
aws sqs get-queue-attributes --queue-url "$q" --attribute-names All --query Attributes.QueueArn --output text | grep -q ':cli-basic$' || fail "queue arn"
aws sqs delete-queue --queue-url "$q"
echo "awscli checks passed"
