// Drives Sluice with @aws-sdk/client-sqs (AWS JSON 1.0, MD5 checks on).
// Usage: node client.mjs ENDPOINT
import {
  SQSClient, CreateQueueCommand, SendMessageCommand, SendMessageBatchCommand, ReceiveMessageCommand,
  DeleteMessageCommand, GetQueueAttributesCommand, ListQueuesCommand, GetQueueUrlCommand,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const credentials = { accessKeyId: "AKIDJS", secretAccessKey: "secret" };
const fail = (what) => { console.error("FAILED:", what); process.exit(1); };
const check = (cond, what) => { if (!cond) fail(what); };

const sqs = new SQSClient({ region: "us-east-1", endpoint, credentials });
const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "js-basic", Attributes: { VisibilityTimeout: "30" } }));
check(QueueUrl.endsWith("/000000000000/js-basic"), `queue url ${QueueUrl}`);
const body = "hello\r\nwörld 🚀";
const sent = await sqs.send(new SendMessageCommand({
  QueueUrl, MessageBody: body,
  MessageAttributes: { n: { DataType: "Number", StringValue: "7" }, b: { DataType: "Binary", BinaryValue: new Uint8Array([1, 2, 3]) } },
}));
check(sent.MessageId && sent.MD5OfMessageBody, "send answered");
const batch = await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries: [
  { Id: "a", MessageBody: "one" }, { Id: "b", MessageBody: "two", DelaySeconds: 5000 },
] }));
check(batch.Successful.length === 1 && batch.Failed.length === 1 && batch.Failed[0].Code === "InvalidParameterValue", "batch partial failure");
const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10, MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"] }));
check(got.Messages?.length === 2, `received ${got.Messages?.length}`);
const m = got.Messages.find((x) => x.MessageId === sent.MessageId);
check(m.Body === body, "body round trip");
check(Buffer.from(m.MessageAttributes.b.BinaryValue).equals(Buffer.from([1, 2, 3])), "binary attribute");
for (const x of got.Messages) await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: x.ReceiptHandle }));
const attrs = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["All"] }));
check(attrs.Attributes.ApproximateNumberOfMessages === "0", "empty after delete");

// Errors carry the query-compatible code.
try {
  await sqs.send(new GetQueueUrlCommand({ QueueName: "missing-queue" }));
  fail("missing queue found");
} catch (e) {
  check(e.name === "QueueDoesNotExist" && e.Code === "AWS.SimpleQueueService.NonExistentQueue", `error ${e.name} ${e.Code}`);
}

// QueueUrl as endpoint: a client built without `endpoint` follows the
// QueueUrl's origin, even when AWS_ENDPOINT_URL_SQS points elsewhere.
process.env.AWS_ENDPOINT_URL_SQS = "http://127.0.0.1:9";
const follower = new SQSClient({ region: "us-east-1", credentials, logger: { debug() {}, info() {}, warn() {}, error() {} } });
await follower.send(new SendMessageCommand({ QueueUrl, MessageBody: "via queue url" }));
const again = await follower.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 1 }));
check(again.Messages?.[0]?.Body === "via queue url", "QueueUrl-as-endpoint round trip");
const listed = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: "js-" }));
check(listed.QueueUrls.length === 1, "list queues");
console.log("js sdk checks passed");
