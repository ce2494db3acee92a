// Drives Sluice with sqs-consumer (bbc/sqs-consumer over @aws-sdk/client-sqs,
// AWS JSON 1.0, MD5 checks on): a consumer polls, handles messages one at a
// time and in batches, a handler's failure makes its message visible again
// at once (terminateVisibilityTimeout) and it is handled again, and every
// message handled is deleted by the library.
// Usage: node consumer.mjs ENDPOINT
import { Consumer } from "sqs-consumer";
import {
  SQSClient, CreateQueueCommand, SendMessageBatchCommand, GetQueueAttributesCommand,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const credentials = { accessKeyId: "AKIDCONSUMER", secretAccessKey: "secret" };
const fail = (what) => { console.error("FAILED:", what); process.exit(1); };
const check = (cond, what) => { if (!cond) fail(what); };
const deadline = setTimeout(() => fail("timed out"), 90_000);

const sqs = new SQSClient({ region: "us-east-1", endpoint, credentials });

async function fill(QueueUrl, n) {
  const sent = new Set();
  for (let i = 0; i < n; i += 10) {
    const Entries = [];
    for (let k = i; k < Math.min(n, i + 10); k++) {
      Entries.push({ Id: `m${k}`, MessageBody: `message ${k} ünïcode 🚀` });
      sent.add(`message ${k} ünïcode 🚀`);
    }
    const out = await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries }));
    check((out.Failed ?? []).length === 0, `send failed: ${JSON.stringify(out.Failed)}`);
  }
  return sent;
}

async function drained(QueueUrl) {
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["All"] }));
  return Attributes.ApproximateNumberOfMessages === "0" && Attributes.ApproximateNumberOfMessagesNotVisible === "0";
}

// run starts a consumer with opts, until every message in sent has been
// handled; it resolves with the number of handler calls.
function run(QueueUrl, sent, opts) {
  return new Promise((resolve, reject) => {
    const left = new Set(sent);
    let calls = 0;
    const app = Consumer.create({
      queueUrl: QueueUrl, sqs, waitTimeSeconds: 1, visibilityTimeout: 30, terminateVisibilityTimeout: true, ...opts(left, () => calls++),
    });
    app.on("error", (err) => reject(new Error(`consumer error: ${err.message}`)));
    app.on("empty", () => {
      if (left.size === 0) {
        app.stop({ abort: false });
      }
    });
    app.on("stopped", () => resolve(calls));
    app.start();
  });
}

// One at a time; message 7 fails once, and comes back.
{
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "consumer-single" }));
  const sent = await fill(QueueUrl, 40);
  let failedAt = 0;
  let back = 0; // ms from the failure to the message's second handling
  const calls = await run(QueueUrl, sent, (left, count) => ({
    handleMessage: async (m) => {
      count();
      check(sent.has(m.Body), `unknown body ${m.Body}`);
      if (m.Body.startsWith("message 7 ")) {
        if (!failedAt) {
          failedAt = Date.now();
          throw new Error("the handler fails once");
        }
        back = Date.now() - failedAt;
      }
      left.delete(m.Body);
      return m;
    },
  }));
  check(failedAt > 0, "the failing message was never handled");
  // Made visible at once by the library (ChangeMessageVisibility to 0),
  // not after its 30 s visibility timeout.
  check(back < 10_000, `the failed message came back after ${back} ms`);
  check(calls >= 41, `handler calls ${calls}, want at least 41`);
  check(await drained(QueueUrl), "single: the queue is not empty after the consumer stopped");
}

// In batches of ten.
{
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "consumer-batch" }));
  const sent = await fill(QueueUrl, 60);
  const calls = await run(QueueUrl, sent, (left, count) => ({
    batchSize: 10,
    handleMessageBatch: async (ms) => {
      count();
      check(ms.length >= 1 && ms.length <= 10, `batch of ${ms.length}`);
      for (const m of ms) {
        check(sent.has(m.Body), `unknown body ${m.Body}`);
        left.delete(m.Body);
      }
      return ms;
    },
  }));
  check(calls >= 6, `batch handler calls ${calls}, want at least 6`);
  check(await drained(QueueUrl), "batch: the queue is not empty after the consumer stopped");
}

clearTimeout(deadline);
console.log("sqs-consumer: ok");
