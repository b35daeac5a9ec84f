#!/usr/bin/env python3
"""Sort `perf script` samples of Herald's workers into stages (scripts/profile-pipeline).

Reads `perf script -F comm,pid,tid,ip,sym,dso` on standard input: a header line per sample,
then one frame per line, leaf first, then a blank line. Each sample goes to the first stage, in
the order of STAGES, that any of its frames matches (a JSON writer called by the receipt
publisher is receipts, the same writer called by the renderer is rendering). Swift symbols are
matched mangled or demangled: module and type names appear in both. Samples of librdkafka's own
threads (`rdk:` thread names) are `kafka-threads` whatever their frames.

With the benchmark's JSON as the argument, prints that JSON with a `profile` member: per stage
its share of the samples and `us_per_notification` = share × worker_cpu_us_per_notification.
"""
import json
import re
import sys

STAGES = [
    ("checkpoints", re.compile(r"checkpoint|DeliveryWatermark|[0-9]Watermark", re.I)),
    ("receipts", re.compile(r"ReceiptPublisher|ReceiptBatch|[0-9]Receipt[^a-z]|KafkaProducer|rd_kafka_produce")),
    ("rendering", re.compile(r"PushRender|APNsPayload|APNsProfilePayload|FCMMessage|FCMProfileMessage|RenderedPush|Template|render", re.I)),
    ("http2", re.compile(r"HeraldHTTP2|HeraldAPNs|HeraldFCM|nghttp2|libssl|libcrypto|SSL_|EVP_|HTTP2|APNsClient|FCMClient")),
    ("audience", re.compile(r"HeraldPostgres|libpq|PQ[a-z]|AudiencePage|Audience")),
    ("kafka-consumer", re.compile(r"KafkaConsumer|ConsumerRuntime|rd_kafka|librdkafka")),
]
ORDER = [name for name, _ in STAGES] + ["kafka-threads", "the-rest"]


def stage_of(comm, frames):
    if comm.startswith("rdk:"):
        return "kafka-threads"
    for name, pattern in STAGES:
        if any(pattern.search(frame) for frame in frames):
            return name
    return "the-rest"


def samples(lines):
    header, frames = None, []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if header is not None:
                yield header, frames
            header, frames = None, []
        elif header is None:
            header = line
        else:
            # "  ip symbol+off (dso)"
            parts = line.strip().split(None, 1)
            frames.append(parts[1] if len(parts) > 1 else parts[0])
    if header is not None:
        yield header, frames


SELF_TEST = """\
herald 100/101 [000] 1.0: 1 cycles:
\t7f00 malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t5500 $s10HeraldCore10JSONWriterV5writeyyF (/work/herald)
\t5501 $s12HeraldWorker15ReceiptPublisherC4sendyyF (/work/herald)

herald 100/102 [000] 1.0: 1 cycles:
\t5500 $s10HeraldCore10JSONWriterV5writeyyF (/work/herald)
\t5502 $s12HeraldWorker10PushRenderO6renderyyF (/work/herald)

rdk:broker1 100/103 [001] 1.0: 1 cycles:
\t7f01 rd_kafka_transport_io_serve (/usr/lib/x86_64-linux-gnu/librdkafka.so.1)

herald-http2 100/104 [001] 1.0: 1 cycles:
\t7f02 SSL_write (/usr/lib/x86_64-linux-gnu/libssl.so.3)
\t5503 $s11HeraldHTTP220HTTP2ClientConnectionC5flushyyF (/work/herald)

herald 100/105 [001] 1.0: 1 cycles:
\t7f03 PQgetResult (/usr/lib/x86_64-linux-gnu/libpq.so.5)
\t5504 $s14HeraldPostgres13JobRepositoryC10checkpointyyF (/work/herald)

herald 100/106 [001] 1.0: 1 cycles:
\t7f04 swift_retain (/usr/lib/swift/linux/libswiftCore.so)

"""
SELF_TEST_EXPECTED = ["receipts", "rendering", "kafka-threads", "http2", "checkpoints", "the-rest"]


def stage_of_header(header, frames):
    # The thread name may hold spaces; perf prints it first, then pid/tid.
    match = re.match(r"\s*(.+?)\s+\d+/\d+", header)
    comm = match.group(1) if match else (header.split(None, 1)[0] if header.strip() else "")
    return stage_of(comm, frames)


def self_test():
    got = [stage_of_header(header, frames) for header, frames in samples(SELF_TEST.splitlines(True))]
    if got != SELF_TEST_EXPECTED:
        print(f"profile-stages: self-test failed: {got} != {SELF_TEST_EXPECTED}", file=sys.stderr)
        return 1
    print(f"profile-stages: self-test passed ({len(got)} samples)")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    counts = {name: 0 for name in ORDER}
    total = 0
    for header, frames in samples(sys.stdin):
        counts[stage_of_header(header, frames)] += 1
        total += 1
    bench = {}
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as handle:
            text = handle.read().strip().splitlines()
            bench = json.loads(text[-1]) if text else {}
    per_notification = bench.get("worker_cpu_us_per_notification")
    profile = {"samples": total}
    for name in ORDER:
        share = counts[name] / total if total else 0
        entry = {"share": round(share, 3)}
        if isinstance(per_notification, (int, float)):
            entry["us_per_notification"] = round(share * per_notification, 1)
        profile[name] = entry
    bench["profile"] = profile
    print(json.dumps(bench, sort_keys=True))
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main())
