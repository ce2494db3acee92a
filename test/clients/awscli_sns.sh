#!/usr/bin/env bash
# Drives Sluice's SNS front with the AWS CLI (SNS is the Query protocol),
# delivering to SQS queues the CLI creates and reads.
# Usage: awscli_sns.sh ENDPOINT
set -euo pipefail
ep=$1
export AWS_ACCESS_KEY_ID=AKIDCLI AWS_SECRET_ACCESS_KEY=secret AWS_DEFAULT_REGION=us-east-1 AWS_PAGER=""
aws() { command "${AWS_CLI:-aws}" --endpoint-url "$ep" --output json "$@"; }
fail() { echo "FAILED: $*" >&2; exit 1; } # stderr: it may run in $(...)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
account=000000000000

# check PYTHON_EXPR JSON: evaluates the expression with the JSON as d.
check() { python3 -c 'import json,sys; d=json.loads(sys.argv[2]); sys.exit(0 if eval(sys.argv[1]) else 1)' "$1" "$2" || fail "$1: $2"; }
# error_of CMD...: runs an aws command that must fail and prints its error code.
error_of() {
  if aws "$@" > /dev/null 2> "$tmp/err"; then fail "aws $* succeeded"; fi
  sed -n 's/.*An error occurred (\([A-Za-z.]*\)).*/\1/p' "$tmp/err" | head -1
}
queue() { # queue NAME [ATTRIBUTES]: prints URL ARN
  local url
  url=$(aws sqs create-queue --queue-name "$1" ${2:+--attributes "$2"} --query QueueUrl --output text)
  echo "$url" "$(aws sqs get-queue-attributes --queue-url "$url" --attribute-names QueueArn --query Attributes.QueueArn --output text)"
}
# receive URL N: receives (and deletes) until N messages came, checks no
# more come, and prints them as a JSON list.
receive() {
  local url=$1 n=$2 out="$tmp/recv" got
  : > "$out"
  for _ in $(seq 20); do
    got=$(aws sqs receive-message --queue-url "$url" --max-number-of-messages 10 --wait-time-seconds 1 \
      --attribute-names All --message-attribute-names All)
    [[ -z $got ]] && got='{}'
    python3 -c 'import json,sys; [print(json.dumps(m)) for m in json.loads(sys.argv[1]).get("Messages", [])]' "$got" >> "$out"
    for rh in $(python3 -c 'import json,sys; [print(m["ReceiptHandle"]) for m in json.loads(sys.argv[1]).get("Messages", [])]' "$got"); do
      aws sqs delete-message --queue-url "$url" --receipt-handle "$rh"
    done
    (( $(wc -l < "$out") >= n )) && break
  done
  (( $(wc -l < "$out") == n )) || fail "$url: $(wc -l < "$out") messages, want $n: $(cat "$out")"
  got=$(aws sqs receive-message --queue-url "$url" --wait-time-seconds 1)
  [[ -z $got || $got == '{}' ]] || fail "$url: unexpected message $got"
  python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])]))' "$out"
}
aws --version || true

q=$(queue sns-env-cli); read -r env_url env_arn <<< "$q"
q=$(queue sns-raw-cli); read -r raw_url raw_arn <<< "$q"

# topics and subscriptions, idempotent
topic=$(aws sns create-topic --name news-cli --query TopicArn --output text)
[[ $topic == "arn:aws:sns:us-east-1:$account:news-cli" ]] || fail "topic arn $topic"
[[ $(aws sns create-topic --name news-cli --query TopicArn --output text) == "$topic" ]] || fail "CreateTopic again"
env_sub=$(aws sns subscribe --topic-arn "$topic" --protocol sqs --notification-endpoint "$env_arn" --query SubscriptionArn --output text)
[[ $env_sub == "$topic":* ]] || fail "a same-account SQS subscription is confirmed at once: $env_sub"
red='{"color":["red"]}'
raw_attrs=$(python3 -c 'import json,sys; print(json.dumps({"RawMessageDelivery": "true", "FilterPolicy": sys.argv[1]}))' "$red")
raw_sub=$(aws sns subscribe --topic-arn "$topic" --protocol sqs --notification-endpoint "$raw_arn" --attributes "$raw_attrs" \
  --return-subscription-arn --query SubscriptionArn --output text)
[[ $raw_sub == "$topic":* && $raw_sub != "$env_sub" ]] || fail "raw subscription $raw_sub"
[[ $(aws sns subscribe --topic-arn "$topic" --protocol sqs --notification-endpoint "$env_arn" --return-subscription-arn --query SubscriptionArn --output text) == "$env_sub" ]] ||
  fail "Subscribe again"
[[ $(aws sns subscribe --topic-arn "$topic" --protocol sqs --notification-endpoint "$raw_arn" --attributes "$raw_attrs" --query SubscriptionArn --output text) == "$raw_sub" ]] ||
  fail "Subscribe again with the same attributes"

aws sns list-topics --query 'Topics[].TopicArn' --output text | tr '\t' '\n' | grep -qx "$topic" || fail "ListTopics"
subs=$(aws sns list-subscriptions-by-topic --topic-arn "$topic" --query Subscriptions)
want=$(python3 -c 'import json,sys; a=sys.argv; print(json.dumps(sorted([[a[1], a[3], "sqs", a[5], a[6]], [a[2], a[4], "sqs", a[5], a[6]]])))' \
  "$env_sub" "$raw_sub" "$env_arn" "$raw_arn" "$topic" "$account")
check "sorted([s['SubscriptionArn'], s['Endpoint'], s['Protocol'], s['TopicArn'], s['Owner']] for s in d['subs']) == d['want']" "{\"subs\": $subs, \"want\": $want}"
ta=$(aws sns get-topic-attributes --topic-arn "$topic" --query Attributes)
check "d['TopicArn'] == '$topic' and d['SubscriptionsConfirmed'] == '2' and d['Owner'] == '$account' and 'Policy' in d" "$ta"

sa=$(aws sns get-subscription-attributes --subscription-arn "$raw_sub" --query Attributes)
check "d['RawMessageDelivery'] == 'true' and d['FilterPolicy'] == '$red' and d['FilterPolicyScope'] == 'MessageAttributes' and d['PendingConfirmation'] == 'false' and d['Endpoint'] == '$raw_arn'" "$sa"
sa=$(aws sns get-subscription-attributes --subscription-arn "$env_sub" --query Attributes)
check "d['RawMessageDelivery'] == 'false' and 'FilterPolicy' not in d" "$sa"
policy='{"n":[{"numeric":[">",100]}]}'
aws sns set-subscription-attributes --subscription-arn "$env_sub" --attribute-name FilterPolicy --attribute-value "$policy"
sa=$(aws sns get-subscription-attributes --subscription-arn "$env_sub" --query Attributes)
check "d.get('FilterPolicy') == '$policy'" "$sa"
aws sns set-subscription-attributes --subscription-arn "$env_sub" --attribute-name FilterPolicy --attribute-value ""
sa=$(aws sns get-subscription-attributes --subscription-arn "$env_sub" --query Attributes)
check "'FilterPolicy' not in d" "$sa"

# tags
aws sns tag-resource --resource-arn "$topic" --tags Key=team,Value=a Key=env,Value=ci
aws sns untag-resource --resource-arn "$topic" --tag-keys env
check "d == [{'Key': 'team', 'Value': 'a'}]" "$(aws sns list-tags-for-resource --resource-arn "$topic" --query Tags)"

# publishing: the envelope queue gets everything, the raw queue the red ones
body=$'hello <1> & "q"\r\n ünïcode ✓'
pub=$(aws sns publish --topic-arn "$topic" --message "$body" --subject greeting \
  --message-attributes '{"color":{"DataType":"String","StringValue":"red"},"n":{"DataType":"Number","StringValue":"42"}}')
check "d['MessageId'] and 'SequenceNumber' not in d" "$pub"
blue=$(aws sns publish --topic-arn "$topic" --message "blue one" --message-attributes '{"color":{"DataType":"String","StringValue":"blue"}}')
cat > "$tmp/entries.json" <<'EOF'
[
  {"Id": "red", "Message": "batch red", "Subject": "batched", "MessageAttributes": {"color": {"DataType": "String", "StringValue": "red"}}},
  {"Id": "blue", "Message": "batch blue", "MessageAttributes": {"color": {"DataType": "String", "StringValue": "blue"}}},
  {"Id": "plain", "Message": "batch plain"}
]
EOF
batch=$(aws sns publish-batch --topic-arn "$topic" --publish-batch-request-entries "file://$tmp/entries.json")
check "sorted(e['Id'] for e in d['Successful']) == ['blue', 'plain', 'red'] and d.get('Failed') == []" "$batch"

envs=$(receive "$env_url" 5)
raws=$(receive "$raw_url" 2)
python3 - "$body" "$pub" "$blue" "$batch" "$envs" "$raws" "$topic" "$env_sub" <<'EOF' || fail "deliveries"
import json, re, sys
body, pub, blue, batch, envs, raws, topic, env_sub = sys.argv[1:]
pub, blue, batch, envs, raws = map(json.loads, (pub, blue, batch, envs, raws))
ids = {body: pub["MessageId"], "blue one": blue["MessageId"]}
ids.update({"batch " + e["Id"]: e["MessageId"] for e in batch["Successful"]})
assert len(set(ids.values())) == 5, ids
got = {}
for m in envs:
    assert not m.get("MessageAttributes"), ("an envelope delivery has SQS attributes", m)
    e = json.loads(m["Body"])
    got[e["Message"]] = e
assert sorted(got) == sorted(ids), sorted(got)
for msg, e in got.items():
    assert e["Type"] == "Notification" and e["TopicArn"] == topic and e["MessageId"] == ids[msg], e
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["Timestamp"]) and e["UnsubscribeURL"].endswith("SubscriptionArn=" + env_sub), e
assert got[body]["Subject"] == "greeting", got[body]
assert got[body]["MessageAttributes"] == {"color": {"Type": "String", "Value": "red"}, "n": {"Type": "Number", "Value": "42"}}, got[body]
assert got["batch red"]["Subject"] == "batched", got["batch red"]
assert "Subject" not in got["blue one"] and "MessageAttributes" not in got["batch plain"], got
raw = {m["Body"]: m for m in raws}
assert sorted(raw) == sorted([body, "batch red"]), sorted(raw)
assert raw[body]["MessageAttributes"] == {"color": {"DataType": "String", "StringValue": "red"}, "n": {"DataType": "Number", "StringValue": "42"}}, raw[body]
EOF

# FIFO topic to FIFO queue: group and content-based deduplication
q=$(queue sns-fifo-cli.fifo FifoQueue=true); read -r fifo_url fifo_arn <<< "$q"
ft=$(aws sns create-topic --name events-cli.fifo --attributes FifoTopic=true,ContentBasedDeduplication=true --query TopicArn --output text)
[[ $ft == *:events-cli.fifo ]] || fail "fifo topic arn $ft"
check "d['FifoTopic'] == 'true' and d['ContentBasedDeduplication'] == 'true'" "$(aws sns get-topic-attributes --topic-arn "$ft" --query Attributes)"
fsub=$(aws sns subscribe --topic-arn "$ft" --protocol sqs --notification-endpoint "$fifo_arn" --query SubscriptionArn --output text)
[[ $fsub == "$ft":* ]] || fail "fifo subscription $fsub"
p1=$(aws sns publish --topic-arn "$ft" --message first --message-group-id g1)
p2=$(aws sns publish --topic-arn "$ft" --message first --message-group-id g1)
p3=$(aws sns publish --topic-arn "$ft" --message second --message-group-id g1)
check "d[0]['MessageId'] == d[1]['MessageId'] != d[2]['MessageId'] and d[0]['SequenceNumber']" "[$p1, $p2, $p3]"
fm=$(receive "$fifo_url" 2)
python3 - "$fm" "$p1" "$ft" <<'EOF' || fail "fifo deliveries"
import hashlib, json, sys
fm, p1, ft = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
fe = [json.loads(m["Body"]) for m in fm]
assert [e["Message"] for e in fe] == ["first", "second"], fe
assert fe[0]["MessageId"] == p1["MessageId"] and fe[0]["SequenceNumber"] and fe[0]["TopicArn"] == ft and fe[0]["Type"] == "Notification", fe[0]
assert fm[0]["Attributes"]["MessageGroupId"] == "g1", fm[0]["Attributes"]
assert fm[0]["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(b"first").hexdigest(), fm[0]["Attributes"]
EOF
[[ $(error_of sns publish --topic-arn "$ft" --message "no group") == InvalidParameter ]] || fail "a FIFO publish without a group: $(cat "$tmp/err")"

# errors
[[ $(error_of sns publish --topic-arn "$topic-missing" --message m) == NotFound ]] || fail "a publish to a missing topic: $(cat "$tmp/err")"
[[ $(error_of sns publish --topic-arn "$topic" --message "") == InvalidParameter ]] || fail "an empty message: $(cat "$tmp/err")"
bad_attrs=$(python3 -c 'import json; print(json.dumps({"FilterPolicy": "{\"color\":[{\"bogus\":1}]}"}))')
[[ $(error_of sns subscribe --topic-arn "$topic" --protocol sqs --notification-endpoint "$env_arn-other" --attributes "$bad_attrs") == InvalidParameter ]] ||
  fail "Subscribe with an invalid filter policy: $(cat "$tmp/err")"
[[ $(error_of sns set-subscription-attributes --subscription-arn "$raw_sub" --attribute-name FilterPolicy --attribute-value '{"color":[{"bogus":1}]}') == InvalidParameter ]] ||
  fail "SetSubscriptionAttributes with an invalid filter policy: $(cat "$tmp/err")"
[[ $(aws sns get-subscription-attributes --subscription-arn "$raw_sub" --query Attributes.FilterPolicy --output text) == "$red" ]] || fail "an invalid policy changed something"
aws sns unsubscribe --subscription-arn "$env_sub"
aws sns unsubscribe --subscription-arn "$env_sub"
[[ $(aws sns list-subscriptions-by-topic --topic-arn "$topic" --query 'Subscriptions[].SubscriptionArn' --output text) == "$raw_sub" ]] || fail "unsubscribed"
[[ $(error_of sns get-subscription-attributes --subscription-arn "$env_sub") == NotFound ]] || fail "attributes of a removed subscription: $(cat "$tmp/err")"
aws sns delete-topic --topic-arn "$topic"
aws sns delete-topic --topic-arn "$ft"
aws sns delete-topic --topic-arn "$topic"
if aws sns list-topics --query 'Topics[].TopicArn' --output text | tr '\t' '\n' | grep -qx -e "$topic" -e "$ft"; then fail "ListTopics after DeleteTopic"; fi
[[ $(error_of sns publish --topic-arn "$topic" --message m) == NotFound ]] || fail "a publish to a deleted topic: $(cat "$tmp/err")"
echo "awscli sns checks passed"
