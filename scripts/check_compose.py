#!/usr/bin/env python3
"""Checks deploy/compose.yaml's wiring without Docker.

`docker compose config` would catch some of this, but no Docker engine or compose plugin runs
where Herald is built and tested (CI included), so these checks read the files instead:

- compose.yaml parses (PyYAML, with its anchors and merge keys) and has services;
- every `depends_on` names a service that exists, with a condition compose knows, and a service
  that `up` starts does not depend on one only a profile starts;
- every health check has a `test` (or `disable: true`), and every service others wait for with
  `condition: service_healthy` has a health check of its own;
- every `${VARIABLE}` compose interpolates is described in deploy/README.md;
- the files a service mounts from deploy/ exist, and the YAML and JSON among them parse;
- Prometheus's scrape targets name the worker service (the one running `herald run`) on its
  HERALD_HTTP_PORT, by DNS service discovery of type A (Docker's DNS has no SRV records), and
  `promtool check config` accepts the file when promtool is installed (Debian's prometheus,
  which scripts/setup installs); Grafana's data source names the Prometheus service;
- the workers reach the simulator under a name its certificate carries (`--public-host`,
  `--cert-name`), on its ports, trust a CA file from a mounted volume, and may fetch tokens from
  its public host (HERALD_FCM_TOKEN_HOSTS).

`check(root)` returns the problems as strings (scripts/check-deploy.py calls it); run as a script
it prints them and exits 1, or prints a one-line summary and exits 0. Needs PyYAML (Debian's
python3-yaml). Usage: scripts/check_compose.py [REPOSITORY_ROOT]
"""
import json
import pathlib
import re
import shutil
import subprocess
import sys
import urllib.parse

try:
    import yaml
except ImportError:
    sys.exit("check_compose: PyYAML is missing (install Debian's python3-yaml, or pip install pyyaml)")

CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
# ${NAME}, ${NAME:-default}, ${NAME?error}, … and $NAME; `$$` is a literal dollar sign.
INTERPOLATION = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")
DEFAULT_HTTP_PORT = "9090"  # HERALD_HTTP_PORT's default (docs/operations.md)


def check(root: pathlib.Path) -> list[str]:
    """The problems found in root/deploy/compose.yaml and the files it mounts."""
    return Inspection(pathlib.Path(root)).run()


class Inspection:
    def __init__(self, root):
        self.root = root
        self.deploy = root / "deploy"
        self.compose_path = self.deploy / "compose.yaml"
        self.problems = []
        self.services = {}
        self.counts = {"services": 0, "dependencies": 0, "healthchecks": 0, "variables": 0, "mounted files": 0}
        self.notes = []

    def problem(self, path, message):
        try:
            shown = pathlib.Path(path).relative_to(self.root)
        except ValueError:
            shown = path
        self.problems.append(f"{shown}: {message}")

    def run(self):
        try:
            compose = yaml.safe_load(self.compose_path.read_text(encoding="utf-8"))
        except OSError as error:
            self.problem(self.compose_path, f"cannot be read: {error.strerror}")
            return self.problems
        except yaml.YAMLError as error:
            self.problem(self.compose_path, f"not valid YAML: {' '.join(str(error).split())}")
            return self.problems
        services = compose.get("services") if isinstance(compose, dict) else None
        if not isinstance(services, dict) or not services:
            self.problem(self.compose_path, "has no services")
            return self.problems
        self.services = {name: spec if isinstance(spec, dict) else {} for name, spec in services.items()}
        self.counts["services"] = len(self.services)
        self.check_dependencies()
        self.check_healthchecks()
        self.check_variables(compose)
        mounted = self.check_mounted_files()
        self.check_prometheus(mounted)
        self.check_grafana(mounted)
        self.check_simulator()
        return self.problems

    # depends_on, in its list and mapping forms.
    def dependencies(self, name):
        depends_on = self.services[name].get("depends_on") or {}
        if isinstance(depends_on, list):
            return {other: {} for other in depends_on}
        return {other: (spec if isinstance(spec, dict) else {}) for other, spec in depends_on.items()}

    def check_dependencies(self):
        for name in self.services:
            profiled = bool(self.services[name].get("profiles"))
            for other, spec in self.dependencies(name).items():
                self.counts["dependencies"] += 1
                where = f"services.{name}.depends_on.{other}"
                if other not in self.services:
                    self.problem(self.compose_path, f"{where}: no service is named {other!r}")
                    continue
                condition = spec.get("condition", "service_started")
                if condition not in CONDITIONS:
                    self.problem(self.compose_path, f"{where}: condition {condition!r} is none of {', '.join(sorted(CONDITIONS))}")
                if not profiled and self.services[other].get("profiles") and spec.get("required", True):
                    self.problem(self.compose_path, f"{where}: {other} runs only in profiles {self.services[other]['profiles']}, "
                                                    f"so `docker compose up` cannot start {name}")

    def healthcheck(self, name):
        """The service's health check test, None without one (or when disabled)."""
        check = self.services[name].get("healthcheck")
        if not isinstance(check, dict) or check.get("disable") is True:
            return None
        return check.get("test")

    def check_healthchecks(self):
        for name, spec in self.services.items():
            check = spec.get("healthcheck")
            if check is None:
                continue
            self.counts["healthchecks"] += 1
            if not isinstance(check, dict):
                self.problem(self.compose_path, f"services.{name}.healthcheck is not a mapping")
            elif check.get("disable") is not True and not check.get("test"):
                self.problem(self.compose_path, f"services.{name}.healthcheck has no test (nor disable: true)")
        for name in self.services:
            for other, spec in self.dependencies(name).items():
                if other in self.services and spec.get("condition") == "service_healthy" and not self.healthcheck(other):
                    self.problem(self.compose_path, f"services.{name} waits for {other} to be healthy, but {other} has no health check "
                                                    "(an image's own check would not do: the herald image's needs `herald run`)")

    def check_variables(self, compose):
        readme_path = self.deploy / "README.md"
        readme = readme_path.read_text(encoding="utf-8") if readme_path.is_file() else ""
        used = set()

        def walk(node):
            if isinstance(node, dict):
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)
            elif isinstance(node, str):
                for match in INTERPOLATION.finditer(node):
                    name = match.group(1) or match.group(2)
                    if name:
                        used.add(name)

        # Values only: compose does not interpolate comments, and keys hold no variables here.
        walk(compose)
        self.counts["variables"] = len(used)
        for name in sorted(used):
            if not re.search(rf"\b{re.escape(name)}\b", readme):
                self.problem(self.compose_path, f"uses ${{{name}}}, which deploy/README.md does not describe")

    def check_mounted_files(self):
        """Parses the files services mount from deploy/ (relative paths); returns {(service, target): path}."""
        mounted = {}
        for name, spec in self.services.items():
            for volume in spec.get("volumes") or []:
                if isinstance(volume, dict):
                    source, target = volume.get("source"), volume.get("target")
                    bind = volume.get("type") == "bind"
                else:
                    parts = str(volume).split(":")
                    source, target = parts[0], parts[1] if len(parts) > 1 else None
                    bind = source.startswith((".", "/", "~"))
                # Absolute host paths belong to the machine compose runs on, not to the repository.
                if not bind or not source or not target or source.startswith(("/", "~")):
                    continue
                path = (self.deploy / source).resolve()
                if not path.exists():
                    self.problem(self.compose_path, f"services.{name} mounts {source}, which does not exist")
                    continue
                mounted[(name, target)] = path
                for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
                    if file.is_file():
                        self.counts["mounted files"] += 1
                        self.parse(file)
        return mounted

    def parse(self, path):
        try:
            text = path.read_text(encoding="utf-8")
            if path.suffix in (".yaml", ".yml"):
                return yaml.safe_load(text)
            if path.suffix == ".json":
                return json.loads(text)
        except (OSError, UnicodeDecodeError) as error:
            self.problem(path, f"cannot be read: {error}")
        except yaml.YAMLError as error:
            self.problem(path, f"not valid YAML: {' '.join(str(error).split())}")
        except json.JSONDecodeError as error:
            self.problem(path, f"not valid JSON: {error}")
        return None

    def command(self, name):
        command = self.services[name].get("command") or []
        return [str(part) for part in (command.split() if isinstance(command, str) else command)]

    def services_running(self, herald_command):
        return [name for name in self.services if self.command(name)[:1] == [herald_command]]

    def environment(self, name):
        environment = self.services[name].get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)
        return {key: str(value) for key, value in environment.items()}

    def image_service(self, image):
        return next((name for name, spec in self.services.items() if str(spec.get("image", "")).split(":")[0].endswith(image)), None)

    def check_prometheus(self, mounted):
        prometheus = self.image_service("prom/prometheus")
        if prometheus is None:
            return
        config_path = "/etc/prometheus/prometheus.yml"
        for argument in self.services[prometheus].get("command") or []:
            if str(argument).startswith("--config.file="):
                config_path = str(argument).split("=", 1)[1]
        path = mounted.get((prometheus, config_path))
        if path is None:
            self.problem(self.compose_path, f"services.{prometheus} reads {config_path}, which no volume of it mounts from deploy/")
            return
        config = self.parse(path)
        if not isinstance(config, dict):
            self.problem(path, "is not a Prometheus configuration (a mapping)")
            return
        promtool = shutil.which("promtool")
        if promtool:
            try:
                result = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
                if result.returncode != 0:
                    self.problem(path, f"promtool check config: {' '.join((result.stdout + result.stderr).split())}")
                self.notes.append("promtool accepts the Prometheus configuration")
            except (OSError, subprocess.TimeoutExpired) as error:
                self.problem(path, f"promtool check config did not run: {error}")
        else:
            self.notes.append("promtool not found: the Prometheus configuration was only parsed")
        workers = self.services_running("run")
        if not workers:
            self.problem(self.compose_path, "no service runs `herald run`: nothing for Prometheus to scrape")
            return
        expected = {(worker, self.environment(worker).get("HERALD_HTTP_PORT", DEFAULT_HTTP_PORT)) for worker in workers}
        found = set()
        for job in config.get("scrape_configs") or []:
            if job.get("metrics_path", "/metrics") != "/metrics":
                self.problem(path, f"job {job.get('job_name')!r} scrapes {job.get('metrics_path')}, not the workers' /metrics")
            for discovery in job.get("dns_sd_configs") or []:
                if discovery.get("type") not in ("A", "AAAA"):
                    self.problem(path, f"job {job.get('job_name')!r}: dns_sd_configs type {discovery.get('type')!r} needs SRV records, "
                                       "which Docker's DNS does not serve (use type A)")
                for host in discovery.get("names") or []:
                    found.add((host, str(discovery.get("port"))))
            for static in job.get("static_configs") or []:
                for target in static.get("targets") or []:
                    found.add(tuple(str(target).rsplit(":", 1)) if ":" in str(target) else (str(target), "80"))
        for worker, port in sorted(expected - found):
            self.problem(path, f"no scrape target is the {worker} service on its HERALD_HTTP_PORT {port} "
                               f"(targets: {', '.join(f'{h}:{p}' for h, p in sorted(found)) or 'none'})")

    def check_grafana(self, mounted):
        grafana = self.image_service("grafana/grafana")
        if grafana is None:
            return
        provisioning = mounted.get((grafana, "/etc/grafana/provisioning"))
        if provisioning is None:
            self.problem(self.compose_path, f"services.{grafana} mounts no provisioning folder at /etc/grafana/provisioning")
            return
        prometheus = self.image_service("prom/prometheus")
        def entries(folder, key):
            for file in sorted((provisioning / folder).glob("*.y*ml")):
                document = self.parse(file)
                for entry in (document.get(key) or []) if isinstance(document, dict) else []:
                    yield file, entry if isinstance(entry, dict) else {}

        sources = [source for _, source in entries("datasources", "datasources")]
        if prometheus and not any(urllib.parse.urlsplit(str(s.get("url", ""))).hostname == prometheus for s in sources):
            self.problem(provisioning, f"no data source's url names the {prometheus} service")
        targets = {target for (service, target) in mounted if service == grafana}
        for file, provider in entries("dashboards", "providers"):
            folder = str((provider.get("options") or {}).get("path", ""))
            if not any(target == folder or target.startswith(folder.rstrip("/") + "/") for target in targets):
                self.problem(file, f"provider {provider.get('name')!r} reads {folder}, where services.{grafana} mounts nothing")

    def check_simulator(self):
        simulators = self.services_running("sim")
        if not simulators:
            return
        sim = simulators[0]
        arguments = self.command(sim)

        def option(name, default=None):
            values = [arguments[i + 1] for i, a in enumerate(arguments[:-1]) if a == name]
            values += [a.split("=", 1)[1] for a in arguments if a.startswith(name + "=")]
            return values or ([default] if default is not None else [])

        public_host = option("--public-host", "127.0.0.1")[-1]
        certificate = {"127.0.0.1", "localhost", public_host, *option("--cert-name")}
        ports = {"HERALD_APNS_ENDPOINT": option("--apns-port", "")[-1], "HERALD_FCM_ENDPOINT": option("--fcm-port", "")[-1]}
        where = f"services.{sim}"
        if option("--listen", "127.0.0.1")[-1] != "0.0.0.0":
            self.problem(self.compose_path, f"{where} listens on one address only: other containers reach it with --listen 0.0.0.0")
        if sim not in certificate:
            self.problem(self.compose_path, f"{where}: its certificate names {', '.join(sorted(certificate))}, not {sim}, "
                                            f"the name other containers reach it by (--public-host or --cert-name {sim})")
        for worker in self.services_running("run"):
            if sim not in self.dependencies(worker):
                continue
            environment = self.environment(worker)
            for variable, port in ports.items():
                url = urllib.parse.urlsplit(environment.get(variable, ""))
                if url.hostname is None:
                    continue
                # 127.0.0.1 in a worker's container is the worker itself.
                if url.hostname != sim:
                    self.problem(self.compose_path, f"services.{worker}: {variable} names {url.hostname}, not the {sim} service")
                elif port and str(url.port) != port:
                    self.problem(self.compose_path, f"services.{worker}: {variable} uses port {url.port}; {sim} listens on {port}")
            ca_file = environment.get("HERALD_TLS_CA_FILE")
            targets = [str(v).split(":")[1] for v in self.services[worker].get("volumes") or [] if isinstance(v, str) and ":" in v]
            if ca_file and not any(ca_file.startswith(t.rstrip("/") + "/") for t in targets):
                self.problem(self.compose_path, f"services.{worker}: HERALD_TLS_CA_FILE {ca_file} is in no volume it mounts")
            token_hosts = {h.strip() for h in environment.get("HERALD_FCM_TOKEN_HOSTS", "").split(",") if h.strip()}
            if public_host not in token_hosts:
                self.problem(self.compose_path, f"services.{worker}: HERALD_FCM_TOKEN_HOSTS lacks {public_host}, the token_uri host "
                                                f"of {sim}'s service account (--public-host): its FCM sends would halt")

    def summary(self):
        return "; ".join([", ".join(f"{count} {what}" for what, count in self.counts.items())] + self.notes)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    inspection = Inspection(root)
    problems = inspection.run()
    if problems:
        for line in problems:
            print(f"check_compose: {line}", file=sys.stderr)
        print(f"check_compose: FAILED: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_compose: deploy/compose.yaml holds together: {inspection.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
