#!/usr/bin/env python3
"""Sort `perf script` samples of Herald's workers into stages (scripts/profile-pipeline).

Reads `perf script -F comm,pid,tid,ip,sym,dso` on standard input: a header line per sample,
then one frame per line, leaf first, then a blank line. Each sample goes to the first stage, in
the order of STAGES, that any of its frames matches (a JSON writer called by the receipt
publisher is receipts, the same writer called by the renderer is rendering). Samples of
librdkafka's own threads (`rdk:` thread names) are `kafka-threads` whatever their frames.

Swift symbols are demangled (`swift demangle`) and reduced to the function's own qualified name
before matching: parameter, generic and result types are dropped, so
`HeraldWorker.ShardRun.dispatch(_: HeraldCore.Receipt.Provider)` is the shard run, not a
receipt. A frame matches on that name or on its library (libssl, libpq, librdkafka…).

With the benchmark's JSON as the argument, prints that JSON with a `profile` member: per stage
its share of the samples and `us_per_notification` = share × worker_cpu_us_per_notification.
"""
import json
import re
import shutil
import subprocess
import sys

STAGES = [
    ("checkpoints", re.compile(r"checkpoint|Watermark", re.I)),
    ("receipts", re.compile(r"ReceiptPublisher|ReceiptBatch|HeraldCore\.Receipt\b|KafkaProducer|rd_kafka_produce")),
    ("rendering", re.compile(r"PushRender|APNsPayload|APNsProfilePayload|FCMMessage|FCMProfileMessage|RenderedPush"
                             r"|APNsNotification\.forJob|Template|\.render", re.I)),
    ("http2", re.compile(r"HeraldHTTP2\.|HeraldAPNs\.|HeraldFCM\.|nghttp2|libssl|libcrypto|\bSSL_|\bEVP_")),
    ("audience", re.compile(r"HeraldPostgres\.|libpq|\bPQ[a-z]|Audience")),
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


FRAME = re.compile(r"^\s*(?:[0-9a-f]+\s+)?(.*?)(?:\s+\(([^()]*)\))?$")


def samples(lines):
    """Yields (header, [(symbol, dso)]) per sample."""
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
            # "  ip symbol (dso)"
            match = FRAME.match(line)
            symbol, dso = (match.group(1), match.group(2) or "") if match else (line.strip(), "")
            frames.append((re.sub(r"\+0x[0-9a-f]+$", "", symbol), dso))
    if header is not None:
        yield header, frames


def demangler(symbols):
    """Maps each Swift symbol to its demangled text (itself when swift-demangle is absent)."""
    mangled = sorted({s for s in symbols if s.startswith(("$s", "_$s", "$S"))})
    tool = shutil.which("swift-demangle")
    if not mangled or tool is None:
        return {}
    result = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, check=False)
    lines = result.stdout.splitlines()
    return dict(zip(mangled, lines)) if result.returncode == 0 and len(lines) == len(mangled) else {}


def own_name(text):
    """The function's own qualified name: nested (…) and <…> groups, `-> result` and `: type` dropped."""
    text = re.sub(r"\((\S+) in _[0-9A-F]+\)", r"\1", text)  # private names: (handle in _1A2B…)
    text = re.sub(r"\(extension in [^)]*\):", "", text)
    text = text.replace("->", "\x00")
    out, depth = [], 0
    for ch in text:
        if ch in "(<":
            depth += 1
        elif ch in ")>" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out)
    return re.split(r"\x00| : ", text, maxsplit=1)[0].strip()


def frame_names(frames, names):
    return [own_name(names.get(symbol, symbol)) + " " + dso for symbol, dso in frames]


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

herald 100/107 [001] 1.0: 1 cycles:
\t5505 $s10HeraldCore10JSONWriterV5writeyyF (/work/herald)
\t5506 $s12HeraldWorker8ShardRunC8dispatch_8providery10HeraldCore7ReceiptV8ProviderO_AHtF (/work/herald)

herald 100/108 [001] 1.0: 1 cycles:
\t5507 $s11HeraldHTTP211HTTP2ClientC4sendyyF (/work/herald)

"""
SELF_TEST_EXPECTED = ["receipts", "rendering", "kafka-threads", "http2", "checkpoints", "the-rest", "the-rest", "http2"]


def stage_of_header(header, frames, names):
    # The thread name may hold spaces; perf prints it first, then pid/tid.
    match = re.match(r"\s*(.+?)\s+\d+/\d+", header)
    comm = match.group(1) if match else (header.split(None, 1)[0] if header.strip() else "")
    return stage_of(comm, frame_names(frames, names))


def self_test():
    parsed = list(samples(SELF_TEST.splitlines(True)))
    names = demangler(symbol for _, frames in parsed for symbol, _ in frames)
    if not names:
        print("profile-stages: self-test needs swift-demangle on PATH", file=sys.stderr)
        return 1
    got = [stage_of_header(header, frames, names) for header, frames in parsed]
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
    parsed = list(samples(sys.stdin))
    names = demangler(symbol for _, frames in parsed for symbol, _ in frames)
    for header, frames in parsed:
        counts[stage_of_header(header, frames, names)] += 1
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
