// Drives Sluice's SNS front with @aws-sdk/client-sns (AWS Query protocol),
// delivering to queues that @aws-sdk/client-sqs (JSON) creates and reads.
// Usage: node sns.mjs ENDPOINT
import { createHash } from "node:crypto";
import {
  SNSClient, CreateTopicCommand, DeleteTopicCommand, ListTopicsCommand, GetTopicAttributesCommand,
  SubscribeCommand, UnsubscribeCommand, ListSubscriptionsByTopicCommand, GetSubscriptionAttributesCommand,
  SetSubscriptionAttributesCommand, PublishCommand, PublishBatchCommand, TagResourceCommand, UntagResourceCommand,
  ListTagsForResourceCommand,
} from "@aws-sdk/client-sns";
import {
  SQSClient, CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, DeleteMessageCommand,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const credentials = { accessKeyId: "AKIDJS", secretAccessKey: "secret" };
const fail = (what) => { console.error("FAILED:", what); process.exit(1); };
const check = (cond, what) => { if (!cond) fail(what); };
const show = (x) => JSON.stringify(x);
const ACCOUNT = "000000000000";

const sns = new SNSClient({ region: "us-east-1", endpoint, credentials });
const sqs = new SQSClient({ region: "us-east-1", endpoint, credentials });

// errorOf returns "ExceptionClass Code HTTPStatus" of the failure of cmd
// (the class the SDK maps the wire code to), or "" when it succeeds.
const errorOf = async (cmd) => {
  try {
    await sns.send(cmd);
  } catch (e) {
    return `${e.name} ${e.Error?.Code} ${e.$metadata?.httpStatusCode}`;
  }
  return "";
};

const queue = async (QueueName, Attributes) => {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName, Attributes }));
  const a = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["QueueArn"] }));
  return [QueueUrl, a.Attributes.QueueArn];
};

// receive receives (and deletes) until n messages came, then checks no more come.
const receive = async (QueueUrl, n) => {
  const got = [];
  const deadline = Date.now() + 20000;
  while (got.length < n && Date.now() < deadline) {
    const r = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
      MessageSystemAttributeNames: ["All"], MessageAttributeNames: ["All"] }));
    for (const m of r.Messages ?? []) {
      got.push(m);
      await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: m.ReceiptHandle }));
    }
  }
  check(got.length === n, `${QueueUrl}: ${got.length} messages, want ${n}: ${show(got.map((m) => m.Body))}`);
  const extra = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 1 }));
  check(!extra.Messages?.length, `${QueueUrl}: unexpected message ${show(extra.Messages)}`);
  return got;
};

const sameSet = (a, b) => show([...a].sort()) === show([...b].sort());

const [envURL, envARN] = await queue("sns-env-js");
const [rawURL, rawARN] = await queue("sns-raw-js");

// topics and subscriptions, idempotent
const { TopicArn: topic } = await sns.send(new CreateTopicCommand({ Name: "news-js" }));
check(topic === `arn:aws:sns:us-east-1:${ACCOUNT}:news-js`, `topic arn ${topic}`);
check((await sns.send(new CreateTopicCommand({ Name: "news-js" }))).TopicArn === topic, "CreateTopic again");
const subscribe = async (Endpoint, Attributes, ReturnSubscriptionArn) =>
  (await sns.send(new SubscribeCommand({ TopicArn: topic, Protocol: "sqs", Endpoint, Attributes, ReturnSubscriptionArn }))).SubscriptionArn;
const envSub = await subscribe(envARN);
check(envSub.startsWith(topic + ":"), `a same-account SQS subscription is confirmed at once: ${envSub}`);
const red = '{"color":["red"]}';
const rawAttrs = { RawMessageDelivery: "true", FilterPolicy: red };
const rawSub = await subscribe(rawARN, rawAttrs, true);
check(rawSub.startsWith(topic + ":") && rawSub !== envSub, `raw subscription ${rawSub}`);
check(await subscribe(envARN, undefined, true) === envSub, "Subscribe again");
check(await subscribe(rawARN, rawAttrs) === rawSub, "Subscribe again with the same attributes");

check((await sns.send(new ListTopicsCommand({}))).Topics.some((t) => t.TopicArn === topic), "ListTopics");
const subs = (await sns.send(new ListSubscriptionsByTopicCommand({ TopicArn: topic }))).Subscriptions;
check(sameSet(subs.map((s) => [s.SubscriptionArn, s.Endpoint, s.Protocol, s.TopicArn, s.Owner].join(" ")),
  [[envSub, envARN, "sqs", topic, ACCOUNT].join(" "), [rawSub, rawARN, "sqs", topic, ACCOUNT].join(" ")]), `ListSubscriptionsByTopic: ${show(subs)}`);
const ta = (await sns.send(new GetTopicAttributesCommand({ TopicArn: topic }))).Attributes;
check(ta.TopicArn === topic && ta.SubscriptionsConfirmed === "2" && ta.Owner === ACCOUNT && ta.Policy, `GetTopicAttributes: ${show(ta)}`);

const subAttrs = async (SubscriptionArn) => (await sns.send(new GetSubscriptionAttributesCommand({ SubscriptionArn }))).Attributes;
let sa = await subAttrs(rawSub);
check(sa.RawMessageDelivery === "true" && sa.FilterPolicy === red && sa.FilterPolicyScope === "MessageAttributes" &&
  sa.PendingConfirmation === "false" && sa.Endpoint === rawARN && sa.TopicArn === topic, `raw subscription attributes: ${show(sa)}`);
sa = await subAttrs(envSub);
check(sa.RawMessageDelivery === "false" && !("FilterPolicy" in sa), `envelope subscription attributes: ${show(sa)}`);
const policy = '{"n":[{"numeric":[">",100]}]}';
await sns.send(new SetSubscriptionAttributesCommand({ SubscriptionArn: envSub, AttributeName: "FilterPolicy", AttributeValue: policy }));
sa = await subAttrs(envSub);
check(sa.FilterPolicy === policy, `FilterPolicy set: ${show(sa)}`);
await sns.send(new SetSubscriptionAttributesCommand({ SubscriptionArn: envSub, AttributeName: "FilterPolicy", AttributeValue: "" }));
sa = await subAttrs(envSub);
check(!("FilterPolicy" in sa), `FilterPolicy removed by an empty value: ${show(sa)}`);

// tags
await sns.send(new TagResourceCommand({ ResourceArn: topic, Tags: [{ Key: "team", Value: "a" }, { Key: "env", Value: "ci" }] }));
await sns.send(new UntagResourceCommand({ ResourceArn: topic, TagKeys: ["env"] }));
const tags = (await sns.send(new ListTagsForResourceCommand({ ResourceArn: topic }))).Tags;
check(show(tags) === show([{ Key: "team", Value: "a" }]), `tags: ${show(tags)}`);

// publishing: the envelope queue gets everything, the raw queue the red ones
const color = (c) => ({ color: { DataType: "String", StringValue: c } });
const body = 'hello <1> & "q"\r\n ünïcode ✓';
const pub = await sns.send(new PublishCommand({ TopicArn: topic, Message: body, Subject: "greeting",
  MessageAttributes: { ...color("red"), n: { DataType: "Number", StringValue: "42" } } }));
check(pub.MessageId && pub.SequenceNumber === undefined, `Publish: ${show(pub)}`);
const blue = await sns.send(new PublishCommand({ TopicArn: topic, Message: "blue one", MessageAttributes: color("blue") }));
const batch = await sns.send(new PublishBatchCommand({ TopicArn: topic, PublishBatchRequestEntries: [
  { Id: "red", Message: "batch red", Subject: "batched", MessageAttributes: color("red") },
  { Id: "blue", Message: "batch blue", MessageAttributes: color("blue") },
  { Id: "plain", Message: "batch plain" },
] }));
check(sameSet(batch.Successful.map((e) => e.Id), ["blue", "plain", "red"]) && batch.Failed?.length === 0, `PublishBatch: ${show(batch)}`);
const ids = { [body]: pub.MessageId, "blue one": blue.MessageId };
for (const e of batch.Successful) ids["batch " + e.Id] = e.MessageId;
check(new Set(Object.values(ids)).size === 5, `distinct message ids: ${show(ids)}`);

const envs = {};
for (const m of await receive(envURL, 5)) {
  check(!m.MessageAttributes, `an envelope delivery has no SQS attributes: ${show(m)}`);
  const env = JSON.parse(m.Body);
  envs[env.Message] = env;
}
check(sameSet(Object.keys(envs), Object.keys(ids)), `envelope messages: ${show(Object.keys(envs))}`);
for (const [msg, env] of Object.entries(envs)) {
  check(env.Type === "Notification" && env.TopicArn === topic && env.MessageId === ids[msg], `envelope ${show(env)}`);
  check(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(env.Timestamp) && env.UnsubscribeURL.endsWith("SubscriptionArn=" + envSub), `envelope ${show(env)}`);
}
check(envs[body].Subject === "greeting", `envelope subject: ${show(envs[body])}`);
check(show(envs[body].MessageAttributes) === show({ color: { Type: "String", Value: "red" }, n: { Type: "Number", Value: "42" } }) ||
  show(envs[body].MessageAttributes) === show({ n: { Type: "Number", Value: "42" }, color: { Type: "String", Value: "red" } }),
`envelope attributes: ${show(envs[body].MessageAttributes)}`);
check(envs["batch red"].Subject === "batched", "batch entry subject");
check(!("Subject" in envs["blue one"]) && !("MessageAttributes" in envs["batch plain"]), "absent subject and attributes");

const raws = Object.fromEntries((await receive(rawURL, 2)).map((m) => [m.Body, m]));
check(sameSet(Object.keys(raws), [body, "batch red"]), `the filtered raw queue got ${show(Object.keys(raws))}`);
const ma = raws[body].MessageAttributes;
check(ma?.color?.DataType === "String" && ma.color.StringValue === "red" && ma.n?.DataType === "Number" && ma.n.StringValue === "42" &&
  Object.keys(ma).length === 2, `raw attributes: ${show(ma)}`);

// FIFO topic to FIFO queue: group and content-based deduplication
const [fifoURL, fifoARN] = await queue("sns-fifo-js.fifo", { FifoQueue: "true" });
const { TopicArn: ft } = await sns.send(new CreateTopicCommand({ Name: "events-js.fifo", Attributes: { FifoTopic: "true", ContentBasedDeduplication: "true" } }));
check(ft.endsWith(":events-js.fifo"), `fifo topic arn ${ft}`);
const fa = (await sns.send(new GetTopicAttributesCommand({ TopicArn: ft }))).Attributes;
check(fa.FifoTopic === "true" && fa.ContentBasedDeduplication === "true", `fifo topic attributes: ${show(fa)}`);
const fsub = (await sns.send(new SubscribeCommand({ TopicArn: ft, Protocol: "sqs", Endpoint: fifoARN }))).SubscriptionArn;
check(fsub.startsWith(ft + ":"), `fifo subscription ${fsub}`);
const p1 = await sns.send(new PublishCommand({ TopicArn: ft, Message: "first", MessageGroupId: "g1" }));
const p2 = await sns.send(new PublishCommand({ TopicArn: ft, Message: "first", MessageGroupId: "g1" }));
const p3 = await sns.send(new PublishCommand({ TopicArn: ft, Message: "second", MessageGroupId: "g1" }));
check(p1.MessageId === p2.MessageId && p1.SequenceNumber, `a duplicate publish: ${show(p1)} ${show(p2)}`);
check(p3.MessageId !== p1.MessageId, "a new message");
const fm = await receive(fifoURL, 2);
const fe = fm.map((m) => JSON.parse(m.Body));
check(show(fe.map((e) => e.Message)) === show(["first", "second"]), `fifo order: ${show(fe)}`);
check(fe[0].MessageId === p1.MessageId && fe[0].SequenceNumber && fe[0].TopicArn === ft && fe[0].Type === "Notification", `fifo envelope ${show(fe[0])}`);
check(fm[0].Attributes.MessageGroupId === "g1", `fifo group: ${show(fm[0].Attributes)}`);
check(fm[0].Attributes.MessageDeduplicationId === createHash("sha256").update("first").digest("hex"), `content dedup id: ${show(fm[0].Attributes)}`);
check(await errorOf(new PublishCommand({ TopicArn: ft, Message: "no group" })) === "InvalidParameterException InvalidParameter 400", "a FIFO publish without a group");

// errors
let got = await errorOf(new PublishCommand({ TopicArn: topic + "-missing", Message: "m" }));
check(got === "NotFoundException NotFound 404", `a publish to a missing topic: ${got}`);
got = await errorOf(new PublishCommand({ TopicArn: topic, Message: "" }));
check(got === "InvalidParameterException InvalidParameter 400", `an empty message: ${got}`);
const bad = '{"color":[{"bogus":1}]}';
got = await errorOf(new SubscribeCommand({ TopicArn: topic, Protocol: "sqs", Endpoint: envARN + "-other", Attributes: { FilterPolicy: bad } }));
check(got === "InvalidParameterException InvalidParameter 400", `Subscribe with an invalid filter policy: ${got}`);
got = await errorOf(new SetSubscriptionAttributesCommand({ SubscriptionArn: rawSub, AttributeName: "FilterPolicy", AttributeValue: bad }));
check(got === "InvalidParameterException InvalidParameter 400", `SetSubscriptionAttributes with an invalid filter policy: ${got}`);
check((await subAttrs(rawSub)).FilterPolicy === red, "an invalid policy changed nothing");
await sns.send(new UnsubscribeCommand({ SubscriptionArn: envSub }));
await sns.send(new UnsubscribeCommand({ SubscriptionArn: envSub }));
const left = (await sns.send(new ListSubscriptionsByTopicCommand({ TopicArn: topic }))).Subscriptions.map((s) => s.SubscriptionArn);
check(show(left) === show([rawSub]), `unsubscribed: ${show(left)}`);
got = await errorOf(new GetSubscriptionAttributesCommand({ SubscriptionArn: envSub }));
check(got === "NotFoundException NotFound 404", `attributes of a removed subscription: ${got}`);
for (const t of [topic, ft, topic]) await sns.send(new DeleteTopicCommand({ TopicArn: t }));
const topics = (await sns.send(new ListTopicsCommand({}))).Topics.map((t) => t.TopicArn);
check(!topics.includes(topic) && !topics.includes(ft), `ListTopics after DeleteTopic: ${show(topics)}`);
got = await errorOf(new PublishCommand({ TopicArn: topic, Message: "m" }));
check(got === "NotFoundException NotFound 404", `a publish to a deleted topic: ${got}`);
console.log("js sdk sns checks passed");
