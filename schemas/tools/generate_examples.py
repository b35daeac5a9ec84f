#!/usr/bin/env python3
"""Write the example files that are impractical to write by hand.

Usage: python3 schemas/tools/generate_examples.py

- examples/valid/job-filter-depth-16.json: a filter nested exactly 16 levels (the deepest allowed).
- examples/invalid/job-filter-depth-17.json: the same with one level more.
- examples/invalid/job-too-many-external-ids.json: 10,001 external ids (one line).
- examples/invalid/job-invalid-utf8.json: a title containing the byte 0xFF.

Each invalid file gets its .expect (the error text Herald prints after `invalid: `).
Deterministic; Python 3 standard library only.
"""

import json
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def base_job(job_id, audience):
    return {
        "schema": "herald.job.v1",
        "id": job_id,
        "app_id": "shop",
        "kind": "notification",
        "created_at": "2026-12-02T17:34:19Z",
        "audience": audience,
        "content": {"title": "Hello", "body": "A message for a carefully chosen audience."},
    }


def nested_filter(depth):
    """A filter `depth` levels deep: alternating and/or/not around a tag predicate."""
    node = {"tag": "level", "op": "eq", "value": str(depth)}
    for level in range(depth - 1, 0, -1):
        wrapper = ("and", "or", "not")[level % 3]
        if wrapper == "not":
            node = {"not": node}
        else:
            node = {wrapper: [{"platform": ["ios"]}, node]}
    return node


def filter_path(depth):
    """The JSON path of the first node at `depth` in nested_filter(depth): the one Herald
    reports (the `platform` sibling comes before the nested node in an and/or)."""
    path = "audience.filter"
    for level in range(1, depth):
        wrapper = ("and", "or", "not")[level % 3]
        index = 0 if level == depth - 1 else 1
        path += ".not" if wrapper == "not" else f".{wrapper}[{index}]"
    return path


def write_json(path, document, indent=2):
    text = json.dumps(document, indent=indent, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")


def main():
    valid = EXAMPLES / "valid"
    invalid = EXAMPLES / "invalid"
    valid.mkdir(parents=True, exist_ok=True)
    invalid.mkdir(parents=True, exist_ok=True)

    write_json(valid / "job-filter-depth-16.json",
               base_job("deep-filter-16", {"filter": nested_filter(16)}))

    write_json(invalid / "job-filter-depth-17.json",
               base_job("deep-filter-17", {"filter": nested_filter(17)}))
    (invalid / "job-filter-depth-17.expect").write_text(
        f"{filter_path(17)}: filter nested deeper than 16 levels\n", encoding="utf-8")

    ids = [f"u{n}" for n in range(10_001)]
    job = base_job("too-many-external-ids", {"external_ids": ids})
    (invalid / "job-too-many-external-ids.json").write_text(
        json.dumps(job, separators=(",", ":")) + "\n", encoding="utf-8")
    (invalid / "job-too-many-external-ids.expect").write_text(
        "audience.external_ids[10000]: at most 10000 external ids\n", encoding="utf-8")

    text = json.dumps(base_job("bad-bytes", {"all": True}), indent=2)
    data = text.encode("utf-8").replace(b'"Hello"', b'"Hel\xfflo"')
    assert b"\xff" in data
    (invalid / "job-invalid-utf8.json").write_bytes(data + b"\n")
    (invalid / "job-invalid-utf8.expect").write_text("not valid UTF-8\n", encoding="utf-8")
    print(f"wrote 4 examples under {EXAMPLES}")


if __name__ == "__main__":
    main()
