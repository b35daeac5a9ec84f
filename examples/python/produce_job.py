#!/usr/bin/env python3
"""Produce one Herald job and wait for its `completed` event (docs/PRODUCING.md).

    pip install 'confluent-kafka[schemaregistry,json]'
    python3 produce_job.py --brokers localhost:9092 --app demo

Exit status: 0 completed (its totals printed), 1 rejected (the reason printed; the job is on the
dead-letter topic), 2 no answer within --timeout, 64 usage.

With --schema-registry URL (e.g. mock://herald for a registry inside this process) the value is
written by Confluent's JSON Schema serializer: a zero byte and the schema id before the JSON.
Herald reads both forms.
"""
import argparse
import json
import os
import sys
import time
import uuid
from datetime import datetime, timezone

from confluent_kafka import Consumer, KafkaException, Producer


def job_document(job_id: str, app: str, title: str) -> dict:
    return {
        "schema": "herald.job.v1",
        "id": job_id,
        "app_id": app,
        "kind": "notification",
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "audience": {"all": True},
        "content": {"title": title, "body": "Sent from the Python example.", "data": {"source": "produce_job.py"}},
    }


def serialize(document: dict, topic: str, registry: str | None) -> bytes:
    if registry is None:
        return json.dumps(document, separators=(",", ":")).encode("utf-8")
    # Confluent's framing: the serializer registers the schema and writes its id before the JSON.
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "schemas", "job.v1.schema.json"), encoding="utf-8") as handle:
        schema = handle.read()
    # new_client: a mock:// URL gives the in-process registry, anything else the REST client.
    serializer = JSONSerializer(schema, SchemaRegistryClient.new_client({"url": registry}))
    return serializer(document, SerializationContext(topic, MessageField.VALUE))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="localhost:9092")
    parser.add_argument("--app", required=True)
    parser.add_argument("--job-id", default=None, help="idempotency key; default: a new one")
    parser.add_argument("--title", default="Hello from Python")
    parser.add_argument("--jobs-topic", default="herald.jobs")
    parser.add_argument("--results-topic", default="herald.results")
    parser.add_argument("--schema-registry", default=None, help="frame the value with Confluent's JSON Schema serializer")
    parser.add_argument("--timeout", type=float, default=120)
    options = parser.parse_args()
    job_id = options.job_id or f"{options.app}-py-{uuid.uuid4().hex[:12]}"

    # Read the results topic from the end before producing, so the job's events are not missed.
    consumer = Consumer({
        "bootstrap.servers": options.brokers,
        "group.id": f"produce-job-example-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "latest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([options.results_topic])
    deadline = time.monotonic() + options.timeout
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)

    # acks=all with idempotence: a retried send is written once; the job id makes a repeated
    # job (a crash before the acknowledgement) a no-op in Herald as well.
    producer = Producer({"bootstrap.servers": options.brokers, "acks": "all", "enable.idempotence": True})
    delivered = []
    producer.produce(options.jobs_topic, key=job_id.encode("utf-8"),
                     value=serialize(job_document(job_id, options.app, options.title), options.jobs_topic, options.schema_registry),
                     on_delivery=lambda error, message: delivered.append(error))
    producer.flush(30)
    if not delivered or delivered[0] is not None:
        print(f"produce failed: {delivered[0] if delivered else 'no acknowledgement within 30 s'}", file=sys.stderr)
        return 2
    print(f"produced job {job_id} to {options.jobs_topic}")

    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            try:
                receipt = json.loads(message.value())
            except ValueError:
                continue
            if receipt.get("job_id") != job_id:
                continue
            stage = receipt.get("stage")
            if stage == "completed":
                print(f"completed: {json.dumps(receipt.get('totals', {}), sort_keys=True)}")
                return 0
            if stage == "rejected":
                print(f"rejected: {receipt.get('reason')} {receipt.get('provider_reason', '')}", file=sys.stderr)
                return 1
        print(f"no completed event for {job_id} within {options.timeout:.0f} s", file=sys.stderr)
        return 2
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
