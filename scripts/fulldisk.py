# Full-disk run (scripts/fulldisk.sh sets up the file system): fill until the disk alarm refuses sends, drain everything
# through the API, check sends resume without a restart, then kill -9,
# restart and check acknowledged sends are present and acknowledged deletes absent.
import boto3, botocore, subprocess, sys, time, os, signal, json
BIN, DIR, PORT = sys.argv[1], sys.argv[2], 19340
URL = "http://127.0.0.1:%d" % PORT
def start():
    p = subprocess.Popen([BIN, "serve", "--data-dir", DIR, "--sqs-addr", "127.0.0.1:%d" % PORT, "--admin-addr", "127.0.0.1:%d" % (PORT+1)] + sys.argv[3:],
                         stderr=open(os.environ.get("LOG", os.devnull), "a"))
    for _ in range(200):
        try:
            boto3.client("sqs", endpoint_url=URL, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x").list_queues()
            return p
        except Exception:
            time.sleep(0.05)
    raise SystemExit("server did not start")
cfg = botocore.config.Config(retries={"max_attempts": 1})
c = lambda: boto3.client("sqs", endpoint_url=URL, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x", config=cfg)
p = start(); s = c()
q = s.create_queue(QueueName="fill")["QueueUrl"]
body = "x" * (60 << 10)
acked_sends, acked_deletes, refused = set(), set(), {}
i = 0
# 1. fill until the alarm refuses 20 sends in a row (JUNK=1: 300 messages,
# then another process takes all but 2 MiB of the disk)
streak = 0
junk = os.path.join(os.path.dirname(DIR.rstrip("/")), "junk")
if os.environ.get("JUNK"):
    for _ in range(300):
        i += 1; s.send_message(QueueUrl=q, MessageBody="%08d" % i + body); acked_sends.add(i)
    st = os.statvfs(DIR)
    subprocess.run(["fallocate", "-l", str(st.f_bavail*st.f_frsize - (2 << 20)), junk], check=True)
while streak < 20:
    i += 1
    try:
        s.send_message(QueueUrl=q, MessageBody="%08d" % i + body)
        acked_sends.add(i); streak = 0
    except botocore.exceptions.ClientError as e:
        code = e.response["Error"]["Code"]; refused[code] = refused.get(code, 0) + 1; streak += 1
        msg = e.response["Error"]["Message"]
st = os.statvfs(DIR); print("filled: %d sends acknowledged, refused %s (%r), free %.1f MiB" % (len(acked_sends), refused, msg, st.f_bavail*st.f_frsize/2**20))
# 2. drain completely through the API (receives and deletes must work on the full disk)
while True:
    r = s.receive_message(QueueUrl=q, MaxNumberOfMessages=10, VisibilityTimeout=60)
    ms = r.get("Messages", [])
    if not ms:
        a = s.get_queue_attributes(QueueUrl=q, AttributeNames=["All"])["Attributes"]
        if a["ApproximateNumberOfMessages"] == "0" and a["ApproximateNumberOfMessagesNotVisible"] == "0": break
        continue
    out = s.delete_message_batch(QueueUrl=q, Entries=[{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(ms)])
    for ok in out.get("Successful", []):
        acked_deletes.add(int(ms[int(ok["Id"])]["Body"][:8]))
    if out.get("Failed"): print("delete failures:", out["Failed"][:2])
print("drained: %d deletes acknowledged" % len(acked_deletes))
if os.path.exists(junk):
    os.remove(junk); print("the other process's file removed")
# 3. sends resume without a restart (the alarm clears by itself once space is back)
t0 = time.time(); resumed = None
while time.time() - t0 < 120:
    i += 1
    try:
        s.send_message(QueueUrl=q, MessageBody="%08d" % i + body); acked_sends.add(i); resumed = time.time() - t0; break
    except botocore.exceptions.ClientError as e:
        time.sleep(0.5)
print("sends resumed after %.1f s" % resumed if resumed is not None else "sends did NOT resume")
for _ in range(200):
    i += 1
    s.send_message(QueueUrl=q, MessageBody="%08d" % i + body); acked_sends.add(i)
r = s.receive_message(QueueUrl=q, MaxNumberOfMessages=10, VisibilityTimeout=60)
for m in r.get("Messages", []):
    s.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"]); acked_deletes.add(int(m["Body"][:8]))
# 4. kill -9 and restart
p.send_signal(signal.SIGKILL); p.wait()
p = start(); s = c()
seen = set()
while True:
    r = s.receive_message(QueueUrl=q, MaxNumberOfMessages=10, VisibilityTimeout=600)
    ms = r.get("Messages", [])
    if not ms: break
    for m in ms: seen.add(int(m["Body"][:8]))
want = acked_sends - acked_deletes
lost, resurrected = want - seen, seen & acked_deletes
print("after kill -9: %d present, want %d; lost %d, resurrected deletes %d" % (len(seen), len(want), len(lost), len(resurrected)))
p.terminate(); p.wait()
sys.exit(1 if lost or resurrected or resumed is None else 0)
