#!/usr/bin/env python3
"""Check Herald's message schemas and their example files.

Usage: scripts/check-schemas.py [ROOT]      (ROOT defaults to the repository root)

1. Every ROOT/schemas/*.schema.json must be a valid JSON Schema (Draft 2020-12) and carry a
   non-empty top-level `examples` array whose entries all validate against it.
2. Every ROOT/schemas/examples/valid/*.json must parse as strict JSON (UTF-8) and validate
   against the schema chosen by its file-name prefix.
3. Every ROOT/schemas/examples/invalid/*.json must be rejected: not UTF-8, not strict JSON, or
   not valid against its schema. Each must have a non-empty sibling X.expect (the error the
   Swift validator must print; only its presence is checked here).
4. The dead letter's `cause` enum equals the causes docs/operations.md ("Dead letters") describes.

"Strict JSON" also rejects duplicate object keys and NaN/Infinity, which Python's json module
would otherwise accept.

Prints one line per file and ends with `schema-check: N passed, M failed`.
Exit status 1 if anything failed or there are no example files. Works with jsonschema >= 4.10
(Debian 12 ships 4.10.3); schemas may only reference their own `$defs` (`#/$defs/...`).
"""

import json
import sys
from pathlib import Path

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError:  # pragma: no cover - environment problem
    print("check-schemas: the Python package 'jsonschema' (>= 4.10) is missing; run scripts/setup",
          file=sys.stderr)
    sys.exit(2)

# Longest prefix first, so that e.g. "device-event-" is never shadowed by a shorter prefix.
PREFIXES = sorted(
    {
        "job-": "job.v1.schema.json",
        "shard-": "shard.v1.schema.json",
        "receipt-": "receipt.v1.schema.json",
        "device-event-": "device-event.v1.schema.json",
        "metrics-": "metrics.v1.schema.json",
        "dead-letter-": "dead-letter.v1.schema.json",
    }.items(),
    key=lambda kv: -len(kv[0]),
)


class StrictJSONError(ValueError):
    pass


def _no_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise StrictJSONError(f"duplicate object key {key!r}")
        obj[key] = value
    return obj


def _no_constants(name):
    raise StrictJSONError(f"non-standard JSON constant {name}")


def load_strict(path):
    """Parse a file as strict UTF-8 JSON. Raises ValueError (incl. UnicodeDecodeError)."""
    text = path.read_bytes().decode("utf-8", errors="strict")
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)


def short(msg, limit=160):
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


class SchemaBroken(Exception):
    """Validation itself failed (e.g. an unresolvable $ref): the schema is at fault."""


def dangling_refs(schema):
    """`$ref`s that are not local JSON pointers resolving inside this document."""
    problems = []

    def resolve(pointer):
        node = schema
        for raw in pointer.lstrip("/").split("/") if pointer not in ("", "/") else []:
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return False
        return True

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                if not ref.startswith("#"):
                    problems.append(f"$ref {ref!r} is not local (use #/$defs/...)")
                elif not resolve(ref[1:]):
                    problems.append(f"$ref {ref!r} does not resolve")
            for key, value in node.items():
                if key not in ("examples", "const", "enum", "default"):  # data, not schema
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return problems


def first_error(validator, instance):
    """The most relevant validation error, or None if the instance is valid."""
    try:
        errors = list(validator.iter_errors(instance))
    except Exception as e:  # unresolvable $ref and the like; exception types vary by version
        raise SchemaBroken(f"validation failed: {type(e).__name__}: {short(e)}") from e
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    where = "/".join(str(p) for p in best.absolute_path)
    return f"{best.message} (at /{where})" if where else best.message


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, name, note=""):
        self.passed += 1
        print(f"ok   {name}{'  (' + note + ')' if note else ''}")

    def fail(self, name, why):
        self.failed += 1
        print(f"FAIL {name}: {why}")


def check_schemas(schema_dir, report):
    """Check every *.schema.json. Returns {file name: validator} for the usable ones."""
    validators = {}
    for path in sorted(schema_dir.glob("*.schema.json")):
        name = path.name
        try:
            schema = load_strict(path)
        except (ValueError, OSError) as e:
            report.fail(name, f"not valid JSON: {short(e)}")
            continue
        try:
            Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as e:
            report.fail(name, f"not a valid Draft 2020-12 schema: {short(e.message)}")
            continue
        declared = schema.get("$schema") if isinstance(schema, dict) else None
        if declared is not None and "2020-12" not in str(declared):
            report.fail(name, f"$schema is {declared!r}, expected Draft 2020-12")
            continue
        refs = dangling_refs(schema)
        if refs:
            report.fail(name, "; ".join(refs))
            continue
        validator = Draft202012Validator(schema)
        validators[name] = validator
        examples = schema.get("examples") if isinstance(schema, dict) else None
        if not isinstance(examples, list) or not examples:
            report.fail(name, "no top-level `examples` array (or it is empty)")
            continue
        bad = []
        for i, example in enumerate(examples):
            try:
                err = first_error(validator, example)
            except SchemaBroken as e:
                err = str(e)
            if err is not None:
                bad.append(f"examples[{i}]: {short(err)}")
        if bad:
            report.fail(name, "; ".join(bad))
        else:
            report.ok(name, f"{len(examples)} example{'s' if len(examples) != 1 else ''}")
    return validators


def schema_for(file_name):
    for prefix, schema in PREFIXES:
        if file_name.startswith(prefix):
            return schema
    return None


def check_examples(examples_dir, validators, report):
    """Check valid/ and invalid/ example files. Returns how many example files there were."""
    count = 0
    for kind in ("valid", "invalid"):
        kind_dir = examples_dir / kind
        files = sorted(kind_dir.glob("*.json")) if kind_dir.is_dir() else []
        for path in files:
            count += 1
            label = f"{kind}/{path.name}"
            schema_name = schema_for(path.name)
            if schema_name is None:
                known = ", ".join(p for p, _ in sorted(PREFIXES))
                report.fail(label, f"file name has no known prefix ({known})")
                continue
            validator = validators.get(schema_name)
            if validator is None:
                report.fail(label, f"schema {schema_name} is missing or unusable")
                continue

            problems = []
            if kind == "invalid":
                expect = path.with_suffix(".expect")
                if not expect.is_file():
                    problems.append(f"missing sibling {expect.name}")
                elif not expect.read_bytes().strip():
                    problems.append(f"{expect.name} is empty")

            try:
                instance = load_strict(path)
            except UnicodeDecodeError as e:
                parse_error = f"not UTF-8: {short(e)}"
            except (ValueError, RecursionError) as e:
                parse_error = f"not JSON: {short(e)}"
            except OSError as e:
                report.fail(label, f"cannot read: {e}")
                continue
            else:
                parse_error = None

            if parse_error is not None:
                err = parse_error
            else:
                try:
                    err = first_error(validator, instance)
                except SchemaBroken as e:
                    report.fail(label, f"{schema_name}: {e}")
                    continue
                if err is not None:
                    err = f"rejected by {schema_name}: {short(err)}"

            if kind == "valid":
                if err is not None:
                    problems.append(err)
                note = ""
            else:
                if err is None:
                    problems.append(f"accepted by schema {schema_name}")
                note = f"{short(err, 110)}" if err else ""
            if problems:
                report.fail(label, "; ".join(problems))
            else:
                report.ok(label, note)

        # An .expect without its .json is almost always a rename gone wrong.
        if kind == "invalid" and kind_dir.is_dir():
            for expect in sorted(kind_dir.glob("*.expect")):
                if not expect.with_suffix(".json").is_file():
                    report.fail(f"{kind}/{expect.name}", f"no matching {expect.stem}.json")
    return count


def check_dead_letter_causes(root, report):
    """The dead letter's `cause` enum and the causes docs/operations.md describes are one list."""
    import re
    label = "dead-letter causes"
    try:
        schema = load_strict(root / "schemas" / "dead-letter.v1.schema.json")
        doc = (root / "docs" / "operations.md").read_text(encoding="utf-8")
    except (ValueError, OSError) as e:
        report.fail(label, f"cannot read: {short(e)}")
        return
    enum = set(schema.get("properties", {}).get("cause", {}).get("enum", []))
    section = doc.split("## Dead letters", 1)[-1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z-]+)` \| [a-z]", section, re.M)) - {"cause"}
    if not enum:
        report.fail(label, "dead-letter.v1.schema.json has no cause enum")
    elif enum != documented:
        report.fail(label, f"schema only: {sorted(enum - documented)}; docs/operations.md only: {sorted(documented - enum)}")
    else:
        report.ok(label, f"{len(enum)} causes in the schema and in docs/operations.md")


def main(argv):
    if len(argv) > 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = Path(argv[1]) if len(argv) == 2 else Path(__file__).resolve().parent.parent
    schema_dir = root / "schemas"
    report = Report()
    if not schema_dir.is_dir():
        report.fail(str(schema_dir), "directory not found")
        validators, count = {}, 0
    else:
        validators = check_schemas(schema_dir, report)
        count = check_examples(schema_dir / "examples", validators, report)
        check_dead_letter_causes(root, report)
        if count == 0:
            report.fail("schemas/examples", "no example files in valid/ or invalid/")
    print(f"schema-check: {report.passed} passed, {report.failed} failed")
    return 1 if report.failed or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
