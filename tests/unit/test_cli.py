"""The command line: startup problems end with one line on stderr and status 2 (3: the port)."""

from __future__ import annotations

import gc
import json
import signal
import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from expert_booking.__main__ import main
from expert_booking.edge import schemas
from expert_booking.version import package_version


@pytest.fixture(autouse=True)
def signal_handlers_restored() -> Iterator[None]:
    """``serve`` installs SIGTERM/SIGINT handlers; keep them out of the test session."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    return monkeypatch


def one_line_of(stderr: str) -> str:
    """The message of the one JSON line on stderr (every stderr line is JSON)."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    entry = json.loads(lines[0])
    assert entry["level"] == "ERROR"
    message: str = entry["message"]
    return message


def test_an_unsupported_trace_exporter_ends_startup_with_one_line_and_status_2(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    assert main(["serve", "--port", "0", "--db", str(tmp_path / "b.db")]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert line.startswith("expert-booking-mcp: configuration error:")
    assert "OTEL_TRACES_EXPORTER" in line
    assert list(tmp_path.iterdir()) == []  # refused before any database file is made


def test_unloadable_schemas_end_startup_with_one_line_and_status_2(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "schemas"
    empty.mkdir()
    clean_env.setattr(schemas, "locate_schema_directory", lambda: empty)
    assert main(["serve", "--port", "0", "--db", str(tmp_path / "b.db")]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert line.startswith("expert-booking-mcp: cannot load the JSON schemas:")


def test_a_malformed_setting_ends_startup_with_one_line_and_status_2(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("HOLD_TTL_SECONDS", "soon")
    assert main(["serve", "--port", "0"]) == 2
    assert "HOLD_TTL_SECONDS" in one_line_of(capsys.readouterr().err)


def test_a_failed_startup_leaves_the_garbage_collector_as_it_found_it(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """``serve`` starts with the collector off (cold start); no exit path may leave it so."""
    clean_env.setenv("HOLD_TTL_SECONDS", "soon")
    assert gc.isenabled()
    assert main(["serve", "--port", "0"]) == 2
    assert gc.isenabled()
    gc.disable()
    try:
        assert main(["serve", "--port", "0"]) == 2
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("port", ["-1", "65536", "http", ""])
def test_the_port_flag_refuses_what_the_port_variable_refuses(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["serve", "--port", port])
    assert excinfo.value.code == 2
    assert "is not a TCP port (0-65535)" in capsys.readouterr().err


def test_version_prints_the_installed_distribution_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["--version"])
    assert excinfo.value.code == 0
    assert capsys.readouterr().out.strip() == f"expert-booking-mcp {package_version()}"


def test_a_busy_port_is_refused_before_the_database_is_created(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "b.db"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--db", str(database)]) == 3
    line = one_line_of(capsys.readouterr().err)
    assert line.startswith(f"expert-booking-mcp: cannot listen on 127.0.0.1:{port}:")
    assert "in use" in line
    assert list(tmp_path.iterdir()) == []


def test_the_proxy_refuses_an_upstream_that_is_not_an_http_url_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["proxy", "--upstream", "ftp://127.0.0.1/mcp", "--port", "0"]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert (
        line
        == "expert-booking-mcp proxy: upstream must be an http:// URL, got 'ftp://127.0.0.1/mcp'"
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.2", "::"])  # noqa: S104 - refused
def test_the_proxy_binds_loopback_only(host: str, capsys: pytest.CaptureFixture[str]) -> None:
    """It adds no access control: exposed, it would hand the network a loopback server."""
    upstream = "http://127.0.0.1:3000/mcp"
    assert main(["proxy", "--upstream", upstream, "--host", host, "--port", "0"]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert line == (
        "expert-booking-mcp proxy: --host must be a loopback address (the proxy serves this "
        f"machine), got {host!r}"
    )


def _newer_database(path: Path) -> Path:
    """A database a later release migrated: its ``schema_migrations`` names version 999."""
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)"
        )
        connection.execute("INSERT INTO schema_migrations VALUES (999, '2031-01-01')")
    connection.close()
    return path


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (
            lambda tmp: tmp / "missing" / "b.db",
            "SQLITE_CANTOPEN: unable to open database file: its directory ",
        ),
        (lambda tmp: _made_dir(tmp / "a-folder"), "that path is a directory; give a file path"),
        (lambda tmp: _written(tmp / "notes.txt", b"not a database, just notes\n" * 100), "NOTADB"),
        (lambda tmp: _newer_database(tmp / "newer.db"), "a newer expert-booking-mcp wrote it"),
    ],
    ids=["missing-directory", "a-directory", "not-sqlite", "newer-schema"],
)
def test_a_database_that_cannot_serve_is_one_line_naming_it_before_serving(
    clean_env: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], Path],
    reason: str,
) -> None:
    database = make(tmp_path)
    assert main(["serve", "--port", "0", "--db", str(database)]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert line.startswith(
        f"expert-booking-mcp: cannot use the database {database} (--db / BOOKING_DB_PATH): "
    )
    assert reason in line


def _made_dir(path: Path) -> Path:
    path.mkdir()
    return path


def _written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_dotenv_that_is_not_utf8_is_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".env").write_bytes("PORT=3000\n".encode("utf-16"))
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--port", "0"]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert line.startswith("expert-booking-mcp: configuration error: ")
    assert line.endswith(".env cannot be read as UTF-8 text (UnicodeDecodeError)")
    assert list(tmp_path.iterdir()) == [tmp_path / ".env"]


def test_none_mode_refuses_a_non_loopback_bind_with_one_line_naming_the_setting(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.delenv("AUTH_MODE", raising=False)
    db = tmp_path / "b.db"
    assert main(["serve", "--host", "0.0.0.0", "--port", "0", "--db", str(db)]) == 2  # noqa: S104
    line = one_line_of(capsys.readouterr().err)
    assert line.startswith("expert-booking-mcp: configuration error: HOST='0.0.0.0'")
    assert "AUTH_MODE=none" in line
    assert not db.exists()


def test_oauth_mode_without_issuer_and_resource_refuses_to_start(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("AUTH_MODE", "oauth")
    clean_env.delenv("AUTH_ISSUER", raising=False)
    clean_env.delenv("AUTH_RESOURCE", raising=False)
    assert main(["serve", "--port", "0", "--db", str(tmp_path / "b.db")]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert line == (
        "expert-booking-mcp: configuration error: AUTH_MODE=oauth needs AUTH_ISSUER and "
        "AUTH_RESOURCE"
    )


def test_a_database_url_for_db_is_refused_as_typed(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql://db.example/booking"
    assert main(["serve", "--port", "0", "--db", url]) == 2
    line = one_line_of(capsys.readouterr().err)
    assert f"--db {url}: PostgreSQL is not supported yet" in line  # not folded to "postgresql:/"
