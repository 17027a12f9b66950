"""The deployment files against docvec's settings and against each other: docker-compose.yml (and its GPU
override), .env.example, the Dockerfile and .dockerignore, prefect.yaml; and docker-compose's own
validator on the compose files.

No Docker engine is used (CI has none): nothing is built or started, so what the tests cover is what can be
read from the files. The compose files are read the way Compose reads them (YAML anchors, `${VAR:-default}`
interpolation from an env file, an override merged onto the base); the validator test checks that model
against docker-compose's own resolution, so the other tests see what Compose would run. docs/deploy.md
says what is left unchecked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import BaseModel
from qdrant_client.common.version_check import is_compatible

from docvec import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
GPU = ROOT / "docker-compose.gpu.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PREFECT_YAML = ROOT / "prefect.yaml"

#: the services built from the Dockerfile (one image), and those that stay up
IMAGE_SERVICES = ("api", "worker", "deploy")
LONG_RUNNING = ("qdrant", "prefect-server", "api", "worker")
#: a value for the one variable .env.example leaves empty on purpose (Compose refuses to start without it)
QDRANT_KEY = "test-qdrant-key"
#: variables Compose itself reads from .env, not the compose files
COMPOSE_OWN = {"COMPOSE_PROJECT_NAME"}
#: what the compose files set on purpose where docvec's default would not do in a container
FIXED_SETTINGS = {"qdrant_url", "qdrant_api_key", "data_dir", "cache_dir"}

CONFIGS = {"cpu": (COMPOSE,), "gpu": (COMPOSE, GPU)}


# -- reading the files as Compose does -------------------------------------------------------------------

_REF = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>.*))?", re.S)


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's substitution: ``$$``, ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
    ``${VAR:?error}``, ``${VAR?error}`` (the colon forms also treat an empty value as missing)."""

    def one(m: re.Match[str]) -> str:
        if m["escaped"]:
            return "$"
        if m["named"]:
            return env.get(m["named"], "")
        ref = _BRACED.fullmatch(m["braced"])
        assert ref, f"not a substitution Compose knows: ${{{m['braced']}}}"
        value, op, arg = env.get(ref["name"]), ref["op"] or "", ref["arg"] or ""
        missing = value is None or (op.startswith(":") and value == "")
        if op.endswith("?") and missing:
            raise LookupError(f"{ref['name']}: {arg}")
        if op.endswith("-") and missing:
            return arg
        return value or ""

    return _REF.sub(one, text)


def _walk(node: Any, fn: Any) -> Any:
    if isinstance(node, dict):
        return {k: _walk(v, fn) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, fn) for v in node]
    if isinstance(node, str):
        return fn(node)
    return node


def _merge(base: Any, override: Any) -> Any:
    """Compose's merge of an override file, for what these files override (mappings merge key by key,
    anything else is replaced)."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for k, v in override.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    return override


def raw(*files: Path) -> dict[str, Any]:
    """The compose files merged, anchors resolved, not interpolated; ``x-`` extension fields dropped."""
    merged: dict[str, Any] = {}
    for f in files:
        merged = _merge(merged, yaml.safe_load(f.read_text()))
    return {k: v for k, v in merged.items() if not k.startswith("x-")}


def load(*files: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The compose files as Compose runs them with ``env`` (the .env file's values)."""
    return _walk(raw(*files), lambda s: interpolate(s, env))  # type: ignore[no-any-return]


def read_env_file(path: Path) -> dict[str, str]:
    """A .env file: ``KEY=value`` lines, comments and blank lines between them."""
    out: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        assert m, f"{path.name}:{n}: not a KEY=value line: {line!r}"
        key, value = m.groups()
        # Compose v2 cuts `value # comment` at the `#`, python-dotenv (docker-compose 1.29, pydantic-settings)
        # versions differ: the file keeps comments on their own lines so that every reader agrees.
        assert " #" not in value and not value.startswith(("'", '"')), f"{path.name}:{n}: {line!r}"
        assert key not in out, f"{path.name}:{n}: {key} twice"
        out[key] = value
    return out


def example_env() -> dict[str, str]:
    """.env.example as a user's .env: its values, and the Qdrant key it leaves for them to set."""
    return {**read_env_file(ENV_EXAMPLE), "DOCVEC_QDRANT_API_KEY": QDRANT_KEY}


def references(*files: Path) -> dict[str, set[str | None]]:
    """Every variable the compose files substitute, with the defaults they give it (None: no default)."""
    found: dict[str, set[str | None]] = {}

    def collect(s: str) -> str:
        for m in _REF.finditer(s):
            if m["named"]:
                found.setdefault(m["named"], set()).add(None)
            elif m["braced"] is not None:
                ref = _BRACED.fullmatch(m["braced"])
                assert ref, m["braced"]
                default = ref["arg"] if (ref["op"] or "").endswith("-") else None
                found.setdefault(ref["name"], set()).add(default)
        return s

    for f in files:
        _walk(yaml.safe_load(f.read_text()), collect)
    return found


def flag(command: list[str], name: str) -> str:
    """The value after ``name`` in an argument list."""
    assert name in command, f"{name} missing from {command}"
    return command[command.index(name) + 1]


def healthcheck_url(service: Mapping[str, Any]) -> str:
    """The URL a service's health check asks (the checks here are one-line urllib or bash probes)."""
    test = " ".join(service["healthcheck"]["test"])
    m = re.search(r"http://[^'\" ]+", test)
    assert m, f"no URL in the health check {test!r}"
    return m.group(0)


def mounts(service: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """A service's volumes as {container path: (source, mode)} (short syntax)."""
    out = {}
    for v in service.get("volumes", []):
        source, target, *mode = v.split(":")
        out[target] = (source, mode[0] if mode else "rw")
    return out


def is_named_volume(source: str) -> bool:
    return not source.startswith(("/", ".", "~"))


def published(service: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """A service's ports as (host address, host port, container port)."""
    out = []
    for p in service.get("ports", []):
        host_ip, host_port, container = str(p).split(":")
        out.append((host_ip, host_port, container.split("/")[0]))
    return out


def setting_path(name: str) -> str | None:
    """The field of docvec.Settings a DOCVEC_* variable sets (``embed.threads`` for
    DOCVEC_EMBED__THREADS), read from the settings' own env_prefix and env_nested_delimiter; None when it
    sets none (pydantic-settings ignores such a variable without a word: extra="ignore")."""
    prefix = Settings.model_config.get("env_prefix") or ""
    delimiter = Settings.model_config.get("env_nested_delimiter") or None
    assert name.startswith(prefix), name
    parts = name[len(prefix) :].lower().split(delimiter) if delimiter else [name[len(prefix) :].lower()]
    model: type[BaseModel] = Settings
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return None
        if i < len(parts) - 1:
            nested = field.annotation
            if not (isinstance(nested, type) and issubclass(nested, BaseModel)):
                return None
            model = nested
    return ".".join(parts)


def settings_from(env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """docvec's settings in a process that has exactly the DOCVEC_* variables of ``env``."""
    for k in list(os.environ):
        if k.upper().startswith("DOCVEC_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return Settings(_env_file=None)


# -- the Dockerfile ----------------------------------------------------------------------------------------


def dockerfile() -> tuple[dict[str, str], list[tuple[str, list[tuple[str, str]]]]]:
    """The Dockerfile as (global ARG defaults, [(stage name, [(INSTRUCTION, arguments)])]), continuation
    lines joined and comments dropped as Docker does."""
    logical: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or (not line.strip() and not pending):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    args: dict[str, str] = {}
    stages: list[tuple[str, list[tuple[str, str]]]] = []
    for line in logical:
        instruction, _, rest = line.strip().partition(" ")
        instruction, rest = instruction.upper(), rest.strip()
        if instruction == "FROM":
            m = re.fullmatch(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            assert m, line
            stages.append((m[2] or f"stage{len(stages)}", [("FROM", m[1])]))
        elif not stages:
            if instruction == "ARG":
                name, _, default = rest.partition("=")
                args[name] = default.strip('"')
        else:
            stages[-1][1].append((instruction, rest))
    return args, stages


def stage(name: str) -> list[tuple[str, str]]:
    for n, instructions in dockerfile()[1]:
        if n == name:
            return instructions
    raise AssertionError(f"the Dockerfile has no stage {name!r}")


def apt_packages(instructions: list[tuple[str, str]]) -> set[str]:
    """The packages a stage's RUN lines install with apt-get."""
    found: set[str] = set()
    for instruction, rest in instructions:
        if instruction != "RUN":
            continue
        for m in re.finditer(r"apt-get install((?:\s+[^\s;&|]+)+)", rest):
            found |= {w for w in m.group(1).split() if not w.startswith("-")}
    return found


def image_env() -> dict[str, str]:
    """The runtime stage's ENV (``ENV A=1 B=2`` form)."""
    out: dict[str, str] = {}
    for instruction, rest in stage("runtime"):
        if instruction == "ENV":
            out.update(dict(pair.split("=", 1) for pair in rest.split()))
    return out


def dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (negated, pattern) pairs, in order."""
    out = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = str(PurePosixPath(line.lstrip("!").strip("/")))
        rx = ""
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
            rx += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
        out.append((negated, re.compile(rx)))
    return out


def in_context(path: str) -> bool:
    """Whether a repository path reaches the build context: Docker's rule, the last pattern that matches
    the path or one of its parent folders decides."""
    if path == ".":
        return True
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negated, rx in dockerignore():
        if any(rx.fullmatch(c) for c in candidates):
            excluded = not negated
    return not excluded


def repo_files(folder: str) -> Iterator[str]:
    """The files of a repository folder, as a fresh clone has them (no caches, no build outputs)."""
    for p in sorted((ROOT / folder).rglob("*")):
        rel = p.relative_to(ROOT).as_posix()
        if p.is_file() and "__pycache__" not in rel and ".egg-info" not in rel:
            yield rel


# -- tests: services ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
def test_the_stack_has_its_services(config: str) -> None:
    services = load(*CONFIGS[config], env=example_env())["services"]
    assert set(services) == {"qdrant", "prefect-server", *IMAGE_SERVICES}
    images = {name: s["image"] for name, s in services.items()}
    # one image for everything docvec runs, built from the Dockerfile; the GPU variant under its own tag
    assert len({images[s] for s in IMAGE_SERVICES}) == 1
    for name in IMAGE_SERVICES:
        assert services[name]["build"]["context"] == "."
    assert images["api"] == ("docvec:cuda" if config == "gpu" else "docvec:latest")
    for name in LONG_RUNNING:
        assert services[name]["restart"] in {"unless-stopped", "always"}, name
    assert services["deploy"]["restart"] == "no"  # one-shot


def test_third_party_images_are_pinned_to_what_docvec_uses() -> None:
    services = load(COMPOSE, env=example_env())["services"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = dict(dep.split("==", 1) for deps in extras.values() for dep in deps if "==" in dep)
    qdrant_tag = services["qdrant"]["image"].removeprefix("qdrant/qdrant:v")
    assert re.fullmatch(r"\d+\.\d+\.\d+", qdrant_tag), services["qdrant"]["image"]
    # qdrant-client's own rule (it warns on every connection otherwise)
    assert is_compatible(pins["qdrant-client"], qdrant_tag), (pins["qdrant-client"], qdrant_tag)
    assert services["prefect-server"]["image"].startswith(f"prefecthq/prefect:{pins['prefect']}-"), pins[
        "prefect"
    ]


# -- tests: docvec's settings ------------------------------------------------------------------------------


def test_every_docvec_variable_is_a_setting() -> None:
    names = set(read_env_file(ENV_EXAMPLE)) | set(image_env())
    for files in CONFIGS.values():
        for service in load(*files, env=example_env())["services"].values():
            names |= set(service.get("environment", {}))
    docvec_names = {n for n in names if n.startswith("DOCVEC_")}
    assert {"DOCVEC_QDRANT_URL", "DOCVEC_MODEL", "DOCVEC_EMBED__GPU_LAYERS"} <= docvec_names
    unknown = sorted(n for n in docvec_names if setting_path(n) is None)
    assert not unknown, f"not settings of docvec.Settings (docvec would ignore them): {unknown}"


def test_setting_lookup_follows_the_settings_model() -> None:
    # the lookup above is what the test stands on: it must tell settings from look-alikes
    assert setting_path("DOCVEC_EMBED__THREADS") == "embed.threads"
    assert setting_path("DOCVEC_RENDER__WORKERS") == "render.workers"
    assert setting_path("DOCVEC_QDRANT_URL") == "qdrant_url"
    assert setting_path("DOCVEC_EMBED_THREADS") is None
    assert setting_path("DOCVEC_EMBED__THREAD") is None
    assert setting_path("DOCVEC_MODEL__NAME") is None


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("service", ["api", "worker"])
def test_the_environment_makes_valid_settings(
    config: str, service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = load(*CONFIGS[config], env=example_env())["services"][service]["environment"]
    s = settings_from(env, monkeypatch)
    assert s.qdrant_url == "http://qdrant:6333" and s.qdrant_api_key == QDRANT_KEY
    assert s.model == "jina-v4" and s.collection == "docvec" and not s.api_key
    # the image's folders are the ones its volumes are on
    image = image_env()
    assert (str(s.data_dir), str(s.cache_dir)) == (image["DOCVEC_DATA_DIR"], image["DOCVEC_CACHE_DIR"])
    if config == "gpu":
        assert s.embed.gpu_layers == -1 and s.embed.vision_gpu
    else:
        assert s.embed.gpu_layers == 0 and not s.embed.vision_gpu


def test_api_and_workers_share_the_settings() -> None:
    for files in CONFIGS.values():
        services = load(*files, env=example_env())["services"]
        api, worker = services["api"]["environment"], services["worker"]["environment"]
        assert {k: v for k, v in worker.items() if k.startswith("DOCVEC_")} == {
            k: v for k, v in api.items() if k.startswith("DOCVEC_")
        }


def test_compose_defaults_are_docvecs_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    # With a .env that sets nothing but the required key, docvec in the stack runs with its own defaults,
    # but for what a container needs (the Qdrant service, the volumes).
    env = load(COMPOSE, env={"DOCVEC_QDRANT_API_KEY": QDRANT_KEY})["services"]["api"]["environment"]
    stack = settings_from(env, monkeypatch).model_dump()
    default = settings_from({}, monkeypatch).model_dump()
    stack["api_key"] = stack["api_key"] or None  # docvec takes an empty key for none (api/_app.py)
    changed = {k for k in stack if stack[k] != default[k]}
    assert changed == FIXED_SETTINGS


def test_env_example_lists_every_variable_the_compose_files_use() -> None:
    used = references(COMPOSE, GPU)
    listed = set(read_env_file(ENV_EXAMPLE))
    assert not set(used) - listed, (
        f"used by the compose files, missing from .env.example: {set(used) - listed}"
    )
    assert not listed - set(used) - COMPOSE_OWN, f"in .env.example, used nowhere: {listed - set(used)}"


def test_env_example_shows_the_defaults() -> None:
    listed = read_env_file(ENV_EXAMPLE)
    for name, defaults in references(COMPOSE, GPU).items():
        assert len(defaults) == 1, f"{name} has different defaults in different places: {defaults}"
        (default,) = defaults
        # a required variable (no default) is left empty for the user to fill
        assert listed[name] == (default or ""), (name, listed[name], default)


def test_env_example_read_by_docvec_as_its_dotenv(monkeypatch: pytest.MonkeyPatch) -> None:
    # docvec run from the repository root reads .env too (env_file=".env"): the copy must parse
    settings_from({}, monkeypatch)  # clears the DOCVEC_* variables of this process
    s = Settings(_env_file=ENV_EXAMPLE)
    assert s.model == "jina-v4" and not s.qdrant_api_key and not s.api_key and s.render.workers == 1


# -- tests: wiring -----------------------------------------------------------------------------------------


def test_api_port_and_health_check_match_its_command() -> None:
    api = load(COMPOSE, env=example_env())["services"]["api"]
    command = api["command"]
    assert command[:2] == ["docvec", "serve"] and flag(command, "--host") == "0.0.0.0"
    port = flag(command, "--port")
    assert [p[2] for p in published(api)] == [port]
    url = urlsplit(healthcheck_url(api))
    assert (url.hostname, str(url.port), url.path) == ("127.0.0.1", port, "/healthz")
    # `docker run docvec` serves the same way, and the image's own check asks the same URL
    runtime = dict(stage("runtime"))
    assert re.findall(r'"([^"]+)"', runtime["CMD"]) == command
    assert runtime["EXPOSE"] == port
    assert healthcheck_url({"healthcheck": {"test": [runtime["HEALTHCHECK"]]}}) == healthcheck_url(api)


def test_qdrant_url_points_at_the_qdrant_service() -> None:
    services = load(COMPOSE, env=example_env())["services"]
    url = urlsplit(services["api"]["environment"]["DOCVEC_QDRANT_URL"])
    assert url.scheme == "http" and url.hostname in services
    qdrant = services[url.hostname]
    assert qdrant["image"].startswith("qdrant/qdrant:")
    assert str(url.port) in [p[2] for p in published(qdrant)]
    assert services["qdrant"]["environment"]["QDRANT__SERVICE__API_KEY"] == QDRANT_KEY
    # the health check is an HTTP request to the readiness endpoint on the same port (not a bare connect)
    probe = services["qdrant"]["healthcheck"]["test"][-1]
    assert f"/dev/tcp/127.0.0.1/{url.port}" in probe and "GET /readyz" in probe and "200" in probe


def test_qdrant_health_probe_is_valid_bash() -> None:
    probe = load(COMPOSE, env=example_env())["services"]["qdrant"]["healthcheck"]["test"]
    assert probe[:3] == ["CMD", "bash", "-c"]
    bash = shutil.which("bash")
    assert bash, "bash is needed to check the probe's syntax"
    result = subprocess.run([bash, "-n", "-c", probe[3]], capture_output=True, text=True, timeout=30)
    # bash -n reports some syntax errors ("in conditional expression") on stderr with status 0
    assert result.returncode == 0 and not result.stderr, result.stderr


def test_workers_poll_the_pool_the_deployments_use() -> None:
    services = load(COMPOSE, env=example_env())["services"]
    worker, deploy = services["worker"], services["deploy"]
    assert worker["command"][:3] == ["prefect", "worker", "start"]
    pool = flag(worker["command"], "--pool")
    assert flag(worker["command"], "--type") == "process"
    script = deploy["command"][-1]
    assert f"prefect work-pool create {pool} --type process" in script and "prefect deploy --all" in script
    assert "--no-prompt" in script  # no terminal in a container
    # both talk to the Prefect server service, on the port it listens on
    server_port = flag(services["prefect-server"]["command"], "--port")
    for s in (worker, deploy):
        assert s["environment"]["PREFECT_API_URL"] == f"http://prefect-server:{server_port}/api"
    # the worker's own health server (--with-healthcheck) is what its check asks
    assert "--with-healthcheck" in worker["command"]
    url = urlsplit(healthcheck_url(worker))
    assert (url.path, str(url.port)) == ("/health", worker["environment"]["PREFECT_WORKER_WEBSERVER_PORT"])
    assert urlsplit(healthcheck_url(services["prefect-server"])).path == "/api/health"


def test_prefect_yaml_deploys_to_the_workers_pool() -> None:
    assert PREFECT_YAML.is_file(), "prefect.yaml is missing: the deploy service runs `prefect deploy --all`"
    services = load(COMPOSE, env=example_env())["services"]
    pool = flag(services["worker"]["command"], "--pool")
    worker_paths = [PurePosixPath(t) for t in mounts(services["worker"])]
    deployments = yaml.safe_load(PREFECT_YAML.read_text())["deployments"]
    assert deployments
    for d in deployments:
        assert d["work_pool"]["name"] == pool, d["name"]
        # its flow is in the image (copied from flows/) and reaches the build context
        source = d["entrypoint"].split(":")[0]
        assert source.startswith("flows/") and (ROOT / source).is_file() and in_context(source), source
        # the folders it indexes are mounted in the workers
        for p in d.get("parameters", {}).get("paths", []):
            assert any(PurePosixPath(p).is_relative_to(m) for m in worker_paths), (d["name"], p)


def test_services_start_in_order_of_health() -> None:
    for files in CONFIGS.values():
        services = load(*files, env=example_env())["services"]
        assert services["api"]["depends_on"] == {"qdrant": {"condition": "service_healthy"}}
        assert services["worker"]["depends_on"] == {
            "qdrant": {"condition": "service_healthy"},
            "prefect-server": {"condition": "service_healthy"},
            "deploy": {"condition": "service_completed_successfully"},
        }
        for name, s in services.items():
            for dep, how in s.get("depends_on", {}).items():
                if how["condition"] == "service_healthy":
                    assert "test" in services[dep].get("healthcheck", {}), f"{name} waits on {dep}'s check"
        for name in LONG_RUNNING:
            assert services[name]["healthcheck"]["test"][0] == "CMD", name
        # the image's HEALTHCHECK is the API's: the other services from the image replace or disable it
        assert services["deploy"]["healthcheck"] == {"disable": True}
        assert healthcheck_url(services["worker"]) != healthcheck_url(services["api"])


def test_volumes_are_declared_and_shared() -> None:
    stack = load(COMPOSE, env=example_env())
    services, declared = stack["services"], set(stack["volumes"])
    used = {src for s in services.values() for src, _ in mounts(s).values() if is_named_volume(src)}
    assert used == declared, (used, declared)
    image = image_env()
    api, worker = mounts(services["api"]), mounts(services["worker"])
    for folder in (image["DOCVEC_DATA_DIR"], image["DOCVEC_CACHE_DIR"]):
        # persistent, and the same volume for the API and the workers
        assert folder in api and is_named_volume(api[folder][0]) and api[folder] == worker[folder], folder
    # models are downloaded under the cache volume
    assert PurePosixPath(image["HF_HOME"]).is_relative_to(image["DOCVEC_CACHE_DIR"])
    assert api["/documents"] == worker["/documents"] and api["/documents"][1] == "ro"
    assert mounts(services["qdrant"])["/qdrant/storage"][0] in declared
    prefect_home = services["prefect-server"]["environment"]["PREFECT_HOME"]
    assert mounts(services["prefect-server"])[prefect_home][0] in declared


def test_ports_stay_on_this_machine_by_default() -> None:
    services = load(COMPOSE, env={"DOCVEC_QDRANT_API_KEY": QDRANT_KEY})["services"]
    ports = [p for s in services.values() for p in published(s)]
    assert ports and all(host_ip == "127.0.0.1" for host_ip, _, _ in ports), ports
    assert len({host_port for _, host_port, _ in ports}) == len(ports)


def test_gpu_variant_reserves_gpus_and_builds_for_cuda() -> None:
    services = load(COMPOSE, GPU, env=example_env())["services"]
    for name in ("api", "worker"):
        (device,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"], name
    for name in IMAGE_SERVICES:
        args = services[name]["build"]["args"]
        assert "-DGGML_CUDA=on" in args["CMAKE_ARGS"].split(), name
        # the Dockerfile's rule: build and runtime images of one release (its wheels are made for that Python)
        assert args["BUILD_IMAGE"].replace("-devel-", "-runtime-") == args["RUNTIME_IMAGE"], args
    assert "deploy" not in services["deploy"]  # the one-shot deploy service needs no GPU
    cpu = load(COMPOSE, env=example_env())["services"]
    assert all("deploy" not in s for s in cpu.values())


# -- tests: the Dockerfile ---------------------------------------------------------------------------------

#: packages that bring a compiler or a build system
_COMPILERS = {"build-essential", "gcc", "g++", "clang", "cmake", "make", "cpp", "ninja-build", "cuda-toolkit"}


def test_dockerfile_builds_llama_cpp_python_in_a_build_stage() -> None:
    _, stages = dockerfile()
    assert [name for name, _ in stages] == ["build", "runtime"]  # the last stage is what `docker build` makes
    build = stage("build")
    runs = " ".join(rest for instruction, rest in build if instruction == "RUN")
    assert "bash llama.cpp/build.sh --python" in runs and 'CMAKE_ARGS="${CMAKE_ARGS}"' in runs
    # it takes the wheel build.sh says it installed: the stamp file build.sh writes
    stamp = re.search(r"stamp_file=.*\)/(\.[\w-]+)", (ROOT / "llama.cpp" / "build.sh").read_text())
    assert stamp and f"/opt/build/{stamp.group(1)}" in runs
    assert {"build-essential", "cmake"} <= apt_packages(build)
    # a portable build by default: build.sh's own default is -march=native
    (cmake_args,) = [
        rest for instruction, rest in build if instruction == "ARG" and rest.startswith("CMAKE_ARGS=")
    ]
    assert "-DGGML_NATIVE=off" in cmake_args


def test_dockerfile_runtime_stage_has_no_compilers() -> None:
    args, _ = dockerfile()
    runtime = stage("runtime")
    packages = apt_packages(runtime)
    assert "libgomp1" in packages  # llama.cpp's CPU backend links OpenMP
    assert not packages & _COMPILERS and not {p for p in packages if p.endswith("-dev")}, packages
    assert runtime[0] == ("FROM", "${RUNTIME_IMAGE}") and "devel" not in args["RUNTIME_IMAGE"]
    assert args["BUILD_IMAGE"] == args["RUNTIME_IMAGE"]  # same Python in both stages (see the Dockerfile)
    install = next(rest for instruction, rest in runtime if instruction == "RUN" and "pip install" in rest)
    # only the wheels made in the build stage: nothing is downloaded or compiled here
    assert "--no-index" in install and "from=build" in install
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert '"docvec[server,flows]"' in install and {"server", "flows"} <= set(extras)


def test_dockerfile_runs_as_a_user_with_volumes() -> None:
    runtime = stage("runtime")
    users = [rest for instruction, rest in runtime if instruction == "USER"]
    assert users and users[-1] not in {"root", "0"}, users
    image = image_env()
    volumes = re.findall(r'"([^"]+)"', dict(runtime)["VOLUME"])
    assert set(volumes) == {image["DOCVEC_DATA_DIR"], image["DOCVEC_CACHE_DIR"]}
    assert dict(runtime)["WORKDIR"] == "/app"  # where the deploy service runs `prefect deploy` from
    assert image["PATH"].startswith("/opt/docvec/bin:")


def test_dockerfile_copies_what_exists_and_reaches_the_context() -> None:
    copied = []
    for _, instructions in dockerfile()[1]:
        for instruction, rest in instructions:
            if instruction == "COPY" and "--from=" not in rest:
                *sources, _dest = [w for w in rest.split() if not w.startswith("--")]
                copied += sources
    assert "." in copied and "llama.cpp/" in copied
    for source in copied:
        assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which the repository lacks"
        assert in_context(source.rstrip("/")), f".dockerignore keeps {source} out of the context"
    # what `COPY . .` must bring: the package, its metadata, llama.cpp's pin and patches, the flows
    needed = [
        "pyproject.toml",
        "README.md",
        "prefect.yaml",
        *repo_files("src/docvec"),
        *repo_files("llama.cpp"),
    ]
    needed += list(repo_files("flows"))
    assert "llama.cpp/build.sh" in needed and "flows/ingest.py" in needed
    left_out = [p for p in needed if not in_context(p)]
    assert not left_out, f".dockerignore keeps these out of the image: {left_out}"


def test_dockerignore_keeps_secrets_and_bulk_out() -> None:
    for path in (".env", ".venv/bin/python", ".git/HEAD", "tests/conftest.py", "documents/a.pdf", "data/x"):
        assert not in_context(path), path
    for path in ("src/docvec/__pycache__/x.pyc", "src/docvec.egg-info/PKG-INFO"):
        assert not in_context(path), path


# -- tests: docker-compose's validator ---------------------------------------------------------------------


def docker_compose(*args: str, env_file: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """docker-compose (Debian's 1.29 package, which `make test` installs) with ``env_file`` as its .env and
    nothing else from this process's environment (a DOCVEC_* variable of the shell would override it)."""
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail(
            "docker-compose is not installed: `make test` installs it (Debian's docker-compose package, "
            "in the Makefile's `browser` target); or: apt-get install --no-install-recommends docker-compose"
        )
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(env_file.parent)}
    return subprocess.run(
        [exe, "--env-file", str(env_file), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def _compose_args(config: str) -> list[str]:
    return [a for f in CONFIGS[config] for a in ("-f", str(f))]


@pytest.mark.parametrize("config", CONFIGS)
def test_docker_compose_accepts_the_files(config: str, tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in example_env().items()))
    check = docker_compose(*_compose_args(config), "config", "-q", env_file=env_file)
    assert check.returncode == 0, check.stdout + check.stderr
    # its resolution and the one the tests above read agree
    resolved = docker_compose(*_compose_args(config), "config", env_file=env_file)
    assert resolved.returncode == 0, resolved.stderr
    theirs = yaml.safe_load(resolved.stdout)["services"]
    ours = load(*CONFIGS[config], env=example_env())["services"]
    assert set(theirs) == set(ours)
    for name in ours:
        for key in ("image", "command", "environment", "depends_on"):
            assert theirs[name].get(key) == ours[name].get(key), (name, key)
        if "build" in ours[name]:
            assert theirs[name]["build"].get("args") == ours[name]["build"].get("args"), name


def test_docker_compose_refuses_to_start_without_a_qdrant_key(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    shutil.copy(ENV_EXAMPLE, env_file)  # as copied: the key still empty
    check = docker_compose("-f", str(COMPOSE), "config", "-q", env_file=env_file)
    assert check.returncode != 0 and "set DOCVEC_QDRANT_API_KEY in .env" in check.stderr, check.stderr


def test_the_deploy_page_says_what_the_build_needs_and_how_queries_reach_the_volume() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    if "--mount=type=cache" in DOCKERFILE.read_text(encoding="utf-8"):
        assert "BuildKit" in text and "Compose v2" in text
    # a query file into the /data volume, the flow's hits out of it
    assert re.search(r"docker compose cp \S+ worker:/data/queries\.txt", text)
    assert "--param queries=/data/queries.txt --param out=/data/hits.jsonl" in text
    assert re.search(r"docker compose cp worker:/data/hits\.jsonl \.", text)
