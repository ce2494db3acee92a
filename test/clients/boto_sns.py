"""Drives Sluice's SNS front with boto3 (SNS is the Query protocol in every
botocore), delivering to SQS queues the same boto3 creates.

Usage: python3 boto_sns.py ENDPOINT
Exits non-zero with a message on the first failed check.
"""
import hashlib
import json
import re
import sys
import time

import boto3
import botocore

endpoint = sys.argv[1]
# botocore 1.29 (Debian's boto3 1.26) ignores AWS_ENDPOINT_URL: pass it.
kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="AKIDPY", aws_secret_access_key="secret")
sns = boto3.client("sns", **kw)
sqs = boto3.client("sqs", **kw)
# Both Pythons share the server: names carry botocore's version.
suffix = "py-" + botocore.__version__.replace(".", "-")
print("boto3", boto3.__version__, "sns protocol", sns.meta.service_model.protocol, "sqs protocol", sqs.meta.service_model.protocol)
ACCOUNT = "000000000000"


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def error_of(fn, **kw):
    """The (code, HTTP status) fn fails with, or None."""
    try:
        fn(**kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None


def queue(name, attrs=None):
    url = sqs.create_queue(QueueName=name, Attributes=attrs or {})["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def receive(url, n):
    """Receives (and deletes) until n messages came, then checks no more come."""
    got = []
    deadline = time.time() + 20
    while len(got) < n and time.time() < deadline:
        r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                AttributeNames=["All"], MessageAttributeNames=["All"])
        for m in r.get("Messages", []):
            got.append(m)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    check(len(got) == n, "%s: %d messages, want %d: %r" % (url, len(got), n, [m["Body"] for m in got]))
    extra = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
    check(not extra, "%s: unexpected message %r" % (url, extra))
    return got


env_url, env_arn = queue("sns-env-" + suffix)
raw_url, raw_arn = queue("sns-raw-" + suffix)

# topics and subscriptions, idempotent
topic = sns.create_topic(Name="news-" + suffix)["TopicArn"]
check(topic == "arn:aws:sns:us-east-1:%s:news-%s" % (ACCOUNT, suffix), "topic arn %s" % topic)
check(sns.create_topic(Name="news-" + suffix)["TopicArn"] == topic, "CreateTopic again")
env_sub = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=env_arn)["SubscriptionArn"]
check(env_sub.startswith(topic + ":"), "a same-account SQS subscription is confirmed at once: %s" % env_sub)
red = '{"color":["red"]}'
raw_attrs = {"RawMessageDelivery": "true", "FilterPolicy": red}
raw_sub = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=raw_arn, Attributes=raw_attrs, ReturnSubscriptionArn=True)["SubscriptionArn"]
check(raw_sub.startswith(topic + ":") and raw_sub != env_sub, "raw subscription %s" % raw_sub)
check(sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=env_arn, ReturnSubscriptionArn=True)["SubscriptionArn"] == env_sub, "Subscribe again")
check(sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=raw_arn, Attributes=raw_attrs)["SubscriptionArn"] == raw_sub, "Subscribe again with the same attributes")

check(topic in [t["TopicArn"] for t in sns.list_topics()["Topics"]], "ListTopics")
subs = sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
check(sorted((s["SubscriptionArn"], s["Endpoint"], s["Protocol"], s["TopicArn"], s["Owner"]) for s in subs) ==
      sorted([(env_sub, env_arn, "sqs", topic, ACCOUNT), (raw_sub, raw_arn, "sqs", topic, ACCOUNT)]), "ListSubscriptionsByTopic: %r" % subs)
ta = sns.get_topic_attributes(TopicArn=topic)["Attributes"]
check(ta["TopicArn"] == topic and ta["SubscriptionsConfirmed"] == "2" and ta["Owner"] == ACCOUNT and "Policy" in ta, "GetTopicAttributes: %r" % ta)

sa = sns.get_subscription_attributes(SubscriptionArn=raw_sub)["Attributes"]
check(sa["RawMessageDelivery"] == "true" and sa["FilterPolicy"] == red and sa["FilterPolicyScope"] == "MessageAttributes" and
      sa["PendingConfirmation"] == "false" and sa["Endpoint"] == raw_arn and sa["TopicArn"] == topic, "raw subscription attributes: %r" % sa)
sa = sns.get_subscription_attributes(SubscriptionArn=env_sub)["Attributes"]
check(sa["RawMessageDelivery"] == "false" and "FilterPolicy" not in sa, "envelope subscription attributes: %r" % sa)
policy = '{"n":[{"numeric":[">",100]}]}'
sns.set_subscription_attributes(SubscriptionArn=env_sub, AttributeName="FilterPolicy", AttributeValue=policy)
sa = sns.get_subscription_attributes(SubscriptionArn=env_sub)["Attributes"]
check(sa.get("FilterPolicy") == policy, "FilterPolicy set: %r" % sa)
sns.set_subscription_attributes(SubscriptionArn=env_sub, AttributeName="FilterPolicy", AttributeValue="")
sa = sns.get_subscription_attributes(SubscriptionArn=env_sub)["Attributes"]
check("FilterPolicy" not in sa, "FilterPolicy removed by an empty value: %r" % sa)

# tags
sns.tag_resource(ResourceArn=topic, Tags=[{"Key": "team", "Value": "a"}, {"Key": "env", "Value": "ci"}])
sns.untag_resource(ResourceArn=topic, TagKeys=["env"])
check(sns.list_tags_for_resource(ResourceArn=topic)["Tags"] == [{"Key": "team", "Value": "a"}], "tags")

# publishing: the envelope queue gets everything, the raw queue the red ones
body = "hello <1> & \"q\"\r\n ünïcode ✓"
pub = sns.publish(TopicArn=topic, Message=body, Subject="greeting", MessageAttributes={
    "color": {"DataType": "String", "StringValue": "red"},
    "n": {"DataType": "Number", "StringValue": "42"},
})
check(pub.get("MessageId") and "SequenceNumber" not in pub, "Publish: %r" % pub)
blue = sns.publish(TopicArn=topic, Message="blue one", MessageAttributes={"color": {"DataType": "String", "StringValue": "blue"}})
batch = sns.publish_batch(TopicArn=topic, PublishBatchRequestEntries=[
    {"Id": "red", "Message": "batch red", "Subject": "batched", "MessageAttributes": {"color": {"DataType": "String", "StringValue": "red"}}},
    {"Id": "blue", "Message": "batch blue", "MessageAttributes": {"color": {"DataType": "String", "StringValue": "blue"}}},
    {"Id": "plain", "Message": "batch plain"},
])
check(sorted(e["Id"] for e in batch["Successful"]) == ["blue", "plain", "red"] and batch["Failed"] == [], "PublishBatch: %r" % batch)
ids = {body: pub["MessageId"], "blue one": blue["MessageId"]}
for e in batch["Successful"]:
    ids["batch " + e["Id"]] = e["MessageId"]
check(len(set(ids.values())) == 5, "distinct message ids: %r" % ids)

envs = {}
for m in receive(env_url, 5):
    check(not m.get("MessageAttributes"), "an envelope delivery has no SQS attributes: %r" % m)
    env = json.loads(m["Body"])
    envs[env["Message"]] = env
check(sorted(envs) == sorted(ids), "envelope messages: %r" % sorted(envs))
for msg, env in envs.items():
    check(env["Type"] == "Notification" and env["TopicArn"] == topic and env["MessageId"] == ids[msg], "envelope %r" % env)
    check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", env["Timestamp"]) and env["UnsubscribeURL"].endswith("SubscriptionArn=" + env_sub), "envelope %r" % env)
e = envs[body]
check(e["Subject"] == "greeting", "envelope subject: %r" % e)
check(e["MessageAttributes"] == {"color": {"Type": "String", "Value": "red"}, "n": {"Type": "Number", "Value": "42"}}, "envelope attributes: %r" % e)
check(envs["batch red"]["Subject"] == "batched", "batch entry subject")
check("Subject" not in envs["blue one"] and "MessageAttributes" not in envs["batch plain"], "absent subject and attributes")

raws = {m["Body"]: m for m in receive(raw_url, 2)}
check(sorted(raws) == sorted([body, "batch red"]), "the filtered raw queue got %r" % sorted(raws))
ma = raws[body]["MessageAttributes"]
check(ma == {"color": {"DataType": "String", "StringValue": "red"}, "n": {"DataType": "Number", "StringValue": "42"}}, "raw attributes: %r" % ma)

# FIFO topic to FIFO queue: group and content-based deduplication
fifo_url, fifo_arn = queue("sns-fifo-%s.fifo" % suffix, {"FifoQueue": "true"})
ft = sns.create_topic(Name="events-%s.fifo" % suffix, Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "true"})["TopicArn"]
check(ft.endswith(":events-%s.fifo" % suffix), "fifo topic arn %s" % ft)
fa = sns.get_topic_attributes(TopicArn=ft)["Attributes"]
check(fa["FifoTopic"] == "true" and fa["ContentBasedDeduplication"] == "true", "fifo topic attributes: %r" % fa)
fsub = sns.subscribe(TopicArn=ft, Protocol="sqs", Endpoint=fifo_arn, Attributes={"RawMessageDelivery": "false"})["SubscriptionArn"]
check(fsub.startswith(ft + ":"), "fifo subscription %s" % fsub)
p1 = sns.publish(TopicArn=ft, Message="first", MessageGroupId="g1")
p2 = sns.publish(TopicArn=ft, Message="first", MessageGroupId="g1")
p3 = sns.publish(TopicArn=ft, Message="second", MessageGroupId="g1")
check(p1["MessageId"] == p2["MessageId"] and p1.get("SequenceNumber"), "a duplicate publish: %r %r" % (p1, p2))
check(p3["MessageId"] != p1["MessageId"], "a new message")
fm = receive(fifo_url, 2)
fe = [json.loads(m["Body"]) for m in fm]
check([e["Message"] for e in fe] == ["first", "second"], "fifo order: %r" % fe)
check(fe[0]["MessageId"] == p1["MessageId"] and fe[0]["SequenceNumber"] and fe[0]["TopicArn"] == ft and fe[0]["Type"] == "Notification", "fifo envelope %r" % fe[0])
check(fm[0]["Attributes"]["MessageGroupId"] == "g1", "fifo group: %r" % fm[0]["Attributes"])
check(fm[0]["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(b"first").hexdigest(), "content dedup id: %r" % fm[0]["Attributes"])
check(error_of(sns.publish, TopicArn=ft, Message="no group") == ("InvalidParameter", 400), "a FIFO publish without a group")

# errors
check(error_of(sns.publish, TopicArn=topic + "-missing", Message="m") == ("NotFound", 404), "a publish to a missing topic")
check(error_of(sns.publish, TopicArn=topic, Message="") == ("InvalidParameter", 400), "an empty message")
bad = '{"color":[{"bogus":1}]}'
check(error_of(sns.subscribe, TopicArn=topic, Protocol="sqs", Endpoint=env_arn + "-other", Attributes={"FilterPolicy": bad}) == ("InvalidParameter", 400),
      "Subscribe with an invalid filter policy")
check(error_of(sns.set_subscription_attributes, SubscriptionArn=raw_sub, AttributeName="FilterPolicy", AttributeValue=bad) == ("InvalidParameter", 400),
      "SetSubscriptionAttributes with an invalid filter policy")
check(sns.get_subscription_attributes(SubscriptionArn=raw_sub)["Attributes"]["FilterPolicy"] == red, "an invalid policy changed nothing")
sns.unsubscribe(SubscriptionArn=env_sub)
sns.unsubscribe(SubscriptionArn=env_sub)
check([s["SubscriptionArn"] for s in sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]] == [raw_sub], "unsubscribed")
check(error_of(sns.get_subscription_attributes, SubscriptionArn=env_sub) == ("NotFound", 404), "attributes of a removed subscription")
for t in (topic, ft):
    sns.delete_topic(TopicArn=t)
sns.delete_topic(TopicArn=topic)
left = [t["TopicArn"] for t in sns.list_topics()["Topics"]]
check(topic not in left and ft not in left, "ListTopics after DeleteTopic: %r" % left)
check(error_of(sns.publish, TopicArn=topic, Message="m") == ("NotFound", 404), "a publish to a deleted topic")
print("boto3 sns checks passed")
