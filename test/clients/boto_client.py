"""Drives Sluice with boto3, whichever protocol this boto3 speaks.

Debian's python3-boto3 (1.26) speaks the Query protocol; current boto3
speaks AWS JSON 1.0. Usage: python3 boto_client.py ENDPOINT
Exits non-zero with a message on the first failed check.
"""
import sys
import time

import boto3
import botocore

endpoint = sys.argv[1]
sqs = boto3.client(
    "sqs", endpoint_url=endpoint, region_name="us-east-1",
    aws_access_key_id="AKIDPY", aws_secret_access_key="secret",
)
proto = sqs.meta.service_model.protocol
suffix = "py%s-%s" % (sys.version_info.minor, proto.replace("-", ""))
print("boto3", boto3.__version__, "protocol", proto)


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def error_code(fn, **kw):
    try:
        fn(**kw)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    return None


# create / send / receive / delete, with CR/LF and non-ASCII bodies
q = sqs.create_queue(QueueName="basic-" + suffix, Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
body = "line1\r\nline2\rline3\n héllo wörld ✓ 🚀 <&>\"'"
r = sqs.send_message(QueueUrl=q, MessageBody=body, MessageAttributes={
    "s": {"DataType": "String", "StringValue": "v"},
    "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    "n": {"DataType": "Number", "StringValue": "42"},
})
check(r["MD5OfMessageBody"] and r["MessageId"], "send answered")
got = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"])
msgs = got.get("Messages", [])
check(len(msgs) == 1, "one message received, got %d" % len(msgs))
check(msgs[0]["Body"] == body, "body round trip: %r" % msgs[0]["Body"])
check(msgs[0]["MessageAttributes"]["b"]["BinaryValue"] == b"\x00\x01", "binary attribute")
check(msgs[0]["Attributes"]["ApproximateReceiveCount"] == "1", "receive count")
check(msgs[0]["MD5OfMessageAttributes"] == r["MD5OfMessageAttributes"], "attribute md5 matches")
sqs.delete_message(QueueUrl=q, ReceiptHandle=msgs[0]["ReceiptHandle"])
check("Messages" not in sqs.receive_message(QueueUrl=q, WaitTimeSeconds=0), "queue empty after delete")

# batches with partial failures
b = sqs.send_message_batch(QueueUrl=q, Entries=[
    {"Id": "ok1", "MessageBody": "a"},
    {"Id": "bad", "MessageBody": "b", "DelaySeconds": 901},
    {"Id": "ok2", "MessageBody": "c"},
])
check(len(b.get("Successful", [])) == 2 and len(b.get("Failed", [])) == 1, "batch partial failure: %r" % b)
check(b["Failed"][0]["Id"] == "bad" and b["Failed"][0]["SenderFault"], "failed entry")
msgs = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)["Messages"]
d = sqs.delete_message_batch(QueueUrl=q, Entries=[{"Id": "m%d" % i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)] + [{"Id": "junk", "ReceiptHandle": "junk"}])
check(len(d["Successful"]) == 2 and d["Failed"][0]["Code"] == "ReceiptHandleIsInvalid", "delete batch: %r" % d)
check(error_code(sqs.send_message_batch, QueueUrl=q, Entries=[{"Id": "x", "MessageBody": "1"}, {"Id": "x", "MessageBody": "2"}]) == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "distinct ids")

# FIFO with deduplication
f = sqs.create_queue(QueueName="fifo-%s.fifo" % suffix, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
a1 = sqs.send_message(QueueUrl=f, MessageBody="same", MessageGroupId="g1")
a2 = sqs.send_message(QueueUrl=f, MessageBody="same", MessageGroupId="g1")
check(a1["MessageId"] == a2["MessageId"], "content dedup")
sqs.send_message(QueueUrl=f, MessageBody="second", MessageGroupId="g1", MessageDeduplicationId="d2")
fm = sqs.receive_message(QueueUrl=f, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
check([m["Body"] for m in fm] == ["same", "second"], "fifo order: %r" % [m["Body"] for m in fm])
check(fm[0]["Attributes"]["MessageGroupId"] == "g1" and fm[0]["Attributes"]["SequenceNumber"], "fifo attributes")
check(error_code(sqs.send_message, QueueUrl=f, MessageBody="x") == "MissingParameter", "fifo needs a group id")

# DLQ and redrive
dlq = sqs.create_queue(QueueName="dlq-" + suffix)["QueueUrl"]
dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
src = sqs.create_queue(QueueName="src-" + suffix, Attributes={
    "RedrivePolicy": '{"deadLetterTargetArn":"%s","maxReceiveCount":"1"}' % dlq_arn})["QueueUrl"]
sqs.send_message(QueueUrl=src, MessageBody="poison")
m = sqs.receive_message(QueueUrl=src)["Messages"][0]
sqs.change_message_visibility(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
check("Messages" not in sqs.receive_message(QueueUrl=src), "poison message left the source")
dm = sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"])["Messages"]
check(len(dm) == 1 and dm[0]["Attributes"]["DeadLetterQueueSourceArn"].endswith(":src-" + suffix), "message in DLQ with its source")
sqs.change_message_visibility(QueueUrl=dlq, ReceiptHandle=dm[0]["ReceiptHandle"], VisibilityTimeout=0)
srcs = sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"]
check(len(srcs) == 1 and srcs[0].endswith("/src-" + suffix), "dead-letter sources: %r" % srcs)
if hasattr(sqs, "start_message_move_task"):
    sqs.start_message_move_task(SourceArn=dlq_arn)
    for _ in range(200):
        t = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0]
        if t["Status"] == "COMPLETED":
            break
        time.sleep(0.05)
    check(t["Status"] == "COMPLETED" and t["ApproximateNumberOfMessagesMoved"] == 1, "move task: %r" % t)
    back = sqs.receive_message(QueueUrl=src).get("Messages", [])
    check(len(back) == 1 and back[0]["Body"] == "poison", "redriven message back in its source")
else:
    print("this botocore predates message move tasks; skipping them here")

# tags
sqs.tag_queue(QueueUrl=q, Tags={"team": "payments", "env": "ci"})
sqs.untag_queue(QueueUrl=q, TagKeys=["env"])
check(sqs.list_queue_tags(QueueUrl=q)["Tags"] == {"team": "payments"}, "tags")

# attribute errors
check(error_code(sqs.set_queue_attributes, QueueUrl=q, Attributes={"VisibilityTimeout": "50000"}) == "InvalidAttributeValue", "out-of-range attribute")
check(error_code(sqs.set_queue_attributes, QueueUrl=q, Attributes={"Foobar": "1"}) == "InvalidAttributeName", "unknown attribute")
check(error_code(sqs.get_queue_url, QueueName="does-not-exist") == "AWS.SimpleQueueService.NonExistentQueue", "missing queue")
check(error_code(sqs.receive_message, QueueUrl=q, MaxNumberOfMessages=11) == "InvalidParameterValue", "max messages")
print("boto3 checks passed")
