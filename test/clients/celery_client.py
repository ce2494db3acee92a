"""Drives Sluice with Celery over kombu's SQS transport (Debian's
python3-celery, python3-kombu and python3-pycurl: kombu 5.2 sends with
boto3 and receives through its own asynchronous Query-protocol client
on pycurl, parsing the XML answers itself).

A worker runs in this process; tasks sent with delay() must each run
once, a task that raises is retried by Celery (a new message), and a
task the worker took without acknowledging late stays until it has
run. The queues are left empty.

Usage: /usr/bin/python3 celery_client.py ENDPOINT
"""
import sys
import threading

import boto3
from celery import Celery
from celery.contrib.testing.worker import start_worker

endpoint = sys.argv[1]
host = endpoint.split("://", 1)[1]


def fail(what):
    print("FAILED:", what, flush=True)
    sys.exit(1)


app = Celery("sluice_celery", broker=f"sqs://AKIDCELERY:secret@{host}")
app.conf.update(
    broker_transport_options={
        "region": "us-east-1",
        "is_secure": False,  # the endpoint is plain HTTP on loopback
        "polling_interval": 0.2,
        "wait_time_seconds": 1,
        "visibility_timeout": 60,
        "queue_name_prefix": "celery-",
    },
    task_default_queue="work",
    task_acks_late=True,
    result_backend=None,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
)

lock = threading.Condition()  # the tasks notify it as they run
seen = {}  # task argument -> runs
retried = {}  # task argument -> attempts


@app.task(name="sluice.add")
def add(key, a, b):
    with lock:
        seen[key] = seen.get(key, 0) + 1
        lock.notify_all()
    return a + b


@app.task(name="sluice.flaky", bind=True, max_retries=3, default_retry_delay=0)
def flaky(self, key):
    with lock:
        retried[key] = retried.get(key, 0) + 1
        n = retried[key]
    if n < 3:
        raise self.retry(countdown=0)
    with lock:
        seen[key] = seen.get(key, 0) + 1
        lock.notify_all()


def wait_for(cond, what, timeout=60):
    with lock:
        if not lock.wait_for(cond, timeout=timeout):
            fail(f"{what}: seen {seen}, retried {retried}")


with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
    keys = [f"task-{i}" for i in range(30)]
    for i, k in enumerate(keys):
        add.delay(k, i, 1)
    flaky.delay("flaky-1")
    wait_for(lambda: all(k in seen for k in keys) and "flaky-1" in seen, "tasks not all run")
    with lock:
        twice = {k: n for k, n in seen.items() if n != 1}
        if twice:
            fail(f"tasks run more than once: {twice}")
        if retried.get("flaky-1") != 3:
            fail(f"the flaky task ran {retried.get('flaky-1')} times, want 3")

# The queue Celery created is there, under its prefix, and empty.
sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint,
                   aws_access_key_id="AKIDCELERY", aws_secret_access_key="secret")
url = sqs.get_queue_url(QueueName="celery-work")["QueueUrl"]
attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
if attrs["ApproximateNumberOfMessages"] != "0" or attrs["ApproximateNumberOfMessagesNotVisible"] != "0":
    fail(f"celery-work not empty: {attrs}")
print(f"celery: ok ({len(seen)} tasks run once each, the flaky one after {retried['flaky-1'] - 1} retries)", flush=True)
