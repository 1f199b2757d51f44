"""Settings from the environment: CONTRACT section 1 defaults, strict parsing, CLI overrides."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest

from expert_booking import settings as settings_module
from expert_booking.setting_values import parse_port
from expert_booking.settings import Settings, SettingsError


def test_defaults_match_the_contract_table() -> None:
    settings = Settings.from_env({})
    assert settings.host == "127.0.0.1"
    assert settings.port == 3000
    assert settings.db_path == Path("./expert-booking.db")
    assert settings.payment_query_base_url == "http://127.0.0.1:3100"
    assert settings.payment_page_base_url == "http://127.0.0.1:3100/pay"
    assert settings.hold_ttl == timedelta(seconds=300)
    assert settings.approval_ttl == timedelta(seconds=120)
    assert settings.approval_skew == timedelta(seconds=5)
    assert settings.slot_cache_ttl == timedelta(seconds=5)
    assert settings.payment_timeout_seconds == 3.0
    assert set(settings.allowed_hosts) == {"127.0.0.1", "localhost", "[::1]"}
    assert set(settings.allowed_origins) == {
        "http://127.0.0.1",
        "http://localhost",
        "http://[::1]",
        "https://127.0.0.1",
        "https://localhost",
        "https://[::1]",
    }
    assert settings == Settings()


def test_every_variable_is_read_and_parsed() -> None:
    settings = Settings.from_env(
        {
            "HOST": "192.0.2.10",
            "PORT": "8080",
            "BOOKING_DB_PATH": "/var/lib/booking/db.sqlite",
            "PAYMENT_QUERY_BASE_URL": "https://payments.example/",
            "PAYMENT_PAGE_BASE_URL": "https://pay.example/checkout",
            "HOLD_TTL_SECONDS": "600",
            "APPROVAL_TTL_SECONDS": "60",
            "APPROVAL_CLOCK_SKEW_SECONDS": "0",
            "SLOT_CACHE_TTL_SECONDS": "0",
            "PAYMENT_TIMEOUT_SECONDS": "1.5",
            "ALLOWED_HOSTS": "booking.example, localhost",
            "ALLOWED_ORIGINS": "https://app.example",
        }
    )
    assert settings == Settings(
        host="192.0.2.10",
        port=8080,
        db_path=Path("/var/lib/booking/db.sqlite"),
        payment_query_base_url="https://payments.example",
        payment_page_base_url="https://pay.example/checkout",
        hold_ttl_seconds=600,
        approval_ttl_seconds=60,
        approval_clock_skew_seconds=0,
        slot_cache_ttl_seconds=0,
        payment_timeout_seconds=1.5,
        allowed_hosts=("booking.example", "localhost"),
        allowed_origins=("https://app.example",),
    )


def test_blank_and_unknown_variables_are_ignored() -> None:
    assert Settings.from_env({"PORT": "  ", "HOLD_TTL_SECONDS": "", "UNRELATED": "x"}) == (
        Settings()
    )


def test_values_are_stripped_of_surrounding_whitespace() -> None:
    assert Settings.from_env({"PORT": " 3001 "}).port == 3001


def test_the_process_environment_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLD_TTL_SECONDS", "42")
    assert Settings.from_env().hold_ttl_seconds == 42


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PORT", "abc"),
        ("PORT", "-1"),
        ("PORT", "65536"),
        ("PORT", "80.5"),
        ("HOLD_TTL_SECONDS", "0"),
        ("HOLD_TTL_SECONDS", "-5"),
        ("HOLD_TTL_SECONDS", "five"),
        ("APPROVAL_TTL_SECONDS", "0"),
        ("APPROVAL_CLOCK_SKEW_SECONDS", "-1"),
        ("SLOT_CACHE_TTL_SECONDS", "1.5"),
        ("PAYMENT_TIMEOUT_SECONDS", "0"),
        ("PAYMENT_TIMEOUT_SECONDS", "-1"),
        ("PAYMENT_TIMEOUT_SECONDS", "nan"),
        ("PAYMENT_TIMEOUT_SECONDS", "inf"),
        ("PAYMENT_QUERY_BASE_URL", "ftp://payments.example"),
        ("PAYMENT_PAGE_BASE_URL", "127.0.0.1:3100/pay"),
        ("PAYMENT_QUERY_BASE_URL", "http://"),
        ("PAYMENT_QUERY_BASE_URL", "http://[::1"),
        ("PAYMENT_QUERY_BASE_URL", "http://payments.example:http"),
        ("PAYMENT_QUERY_BASE_URL", "http://payments.example:70000"),
        ("PAYMENT_QUERY_BASE_URL", "http://payments.example:0"),
        ("ALLOWED_HOSTS", " , ,"),
        ("ALLOWED_ORIGINS", ","),
        # Beyond any date (timedelta and datetime overflow at start or at the first hold):
        ("HOLD_TTL_SECONDS", "99999999999999999999"),
        ("APPROVAL_TTL_SECONDS", "1000000001"),
        ("SLOT_CACHE_TTL_SECONDS", "99999999999999999999"),
        ("CLIENT_CLOCK_TOLERANCE_SECONDS", "99999999999999999999"),
        ("PAYMENT_TIMEOUT_SECONDS", "1e20"),
        ("BOOKING_DB_BUSY_TIMEOUT_MS", "1e20"),
    ],
)
def test_a_malformed_value_is_a_settings_error_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError) as excinfo:
        Settings.from_env({name: value})
    assert str(excinfo.value).startswith(f"{name}=")


@pytest.mark.parametrize(
    "name",
    [
        "BOOKING_DATABASE_URL",
        "BOOKING_DATABASE_LISTEN_URL",
        "APPROVAL_MODE",
        "APPROVAL_NOTIFY_URL",
        "RECEIPT_KEY_FILE",
    ],
)
def test_a_variable_named_for_a_later_capability_is_refused_not_ignored(name: str) -> None:
    """A PostgreSQL URL silently served from a local SQLite file would split the data."""
    with pytest.raises(SettingsError, match=f"^{name} is set, but this release does not"):
        Settings.from_env({name: "postgresql://db.example/booking"})
    assert Settings.from_env({name: " "}) == Settings()


@pytest.mark.parametrize("url", ["postgresql://db.example/booking", "postgres://u@h/db"])
def test_a_database_url_for_db_is_refused(url: str) -> None:
    with pytest.raises(SettingsError, match="PostgreSQL is not supported yet"):
        Settings().with_overrides(db_path=Path(url))
    with pytest.raises(SettingsError, match=r"^BOOKING_DB_PATH=.*PostgreSQL is not supported"):
        Settings.from_env({"BOOKING_DB_PATH": url})


@pytest.mark.parametrize(
    "path", ["C:/data/b.db", "rel:colon.db", "postgres-b.db", "./postgres/b.db"]
)
def test_sqlite_paths_with_colons_or_the_word_stay_paths(path: str) -> None:
    assert Settings.from_env({"BOOKING_DB_PATH": path}).db_path == Path(path)


def test_dotenv_fills_what_the_environment_leaves_unset_or_blank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text(
        "HOLD_TTL_SECONDS=60\nAPPROVAL_TTL_SECONDS=90\nSLOT_CACHE_TTL_SECONDS=7\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOLD_TTL_SECONDS", "")  # blank: unset, so the file's value applies
    monkeypatch.setenv("APPROVAL_TTL_SECONDS", "100")  # set: it wins over the file
    monkeypatch.setenv("SLOT_CACHE_TTL_SECONDS", " ")  # recorded, so the test leaves no trace
    settings_module.load_dotenv_file()
    loaded = Settings.from_env()
    assert os.environ["HOLD_TTL_SECONDS"] == "60"
    assert (loaded.hold_ttl_seconds, loaded.approval_ttl_seconds) == (60, 100)
    assert loaded.slot_cache_ttl_seconds == 7


@pytest.mark.parametrize("bad_line", ["FOO BAR", 'NAME="unclosed', "HOLD_TTL_SECONDS"])
def test_a_dotenv_line_that_is_no_assignment_is_refused_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_line: str
) -> None:
    (tmp_path / ".env").write_text(f"# settings\nHOLD_TTL_SECONDS=60\n{bad_line}\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SettingsError, match=r"\.env line 3 is not NAME=value"):
        settings_module.load_dotenv_file()


@pytest.mark.parametrize(
    ("name", "raw", "rule"),
    [
        ("PORT", "48001x", "must be a TCP port (0-65535)"),
        ("HOLD_TTL_SECONDS", "5m", "must be a positive integer"),
        ("SLOT_CACHE_TTL_SECONDS", "lots", "must be zero or a positive integer"),
        ("PAYMENT_TIMEOUT_SECONDS", "3s", "must be a positive, finite number"),
    ],
)
def test_a_mistyped_number_is_told_the_rule_not_pythons_parse_error(
    name: str, raw: str, rule: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({name: raw})
    assert str(refused.value) == f"{name}={raw!r}: {rule}"


def test_cli_overrides_win_and_none_means_not_given() -> None:
    base = Settings.from_env({"PORT": "4000", "HOST": "127.0.0.1"})
    overridden = base.with_overrides(port=0, host=None, db_path=Path("other.db"))
    assert overridden.port == 0
    assert overridden.host == "127.0.0.1"
    assert overridden.db_path == Path("other.db")
    assert base.port == 4000


@pytest.mark.parametrize(("raw", "port"), [("0", 0), ("3000", 3000), ("65535", 65535)])
def test_parse_port_accepts_the_tcp_port_range(raw: str, port: int) -> None:
    assert parse_port(raw) == port


@pytest.mark.parametrize("raw", ["-1", "65536", "http", "3000.0"])
def test_the_port_parser_refuses_anything_else(raw: str) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env({"PORT": raw})


def test_the_http_bounds_and_the_client_clock_tolerance_are_read_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "CLIENT_CLOCK_TOLERANCE_SECONDS": "30",
            "HTTP_MAX_HEADER_BYTES": "4096",
            "HTTP_MAX_HEADERS": "20",
            "HTTP_HEADER_TIMEOUT_SECONDS": "2.5",
            "HTTP_BODY_TIMEOUT_SECONDS": "3",
            "HTTP_KEEP_ALIVE_SECONDS": "7",
            "HTTP_MAX_CONNECTIONS": "50",
            "REFUSAL_LOG_LINES_PER_SECOND": "5",
        }
    )
    assert settings.client_clock_tolerance.total_seconds() == 30
    assert (settings.http_max_header_bytes, settings.http_max_headers) == (4096, 20)
    assert (settings.http_header_timeout_seconds, settings.http_body_timeout_seconds) == (2.5, 3)
    assert (settings.http_keep_alive_seconds, settings.http_max_connections) == (7, 50)
    assert settings.refusal_log_lines_per_second == 5
    defaults = Settings()
    assert defaults.client_clock_tolerance_seconds == 300


ROOT = Path(__file__).resolve().parents[2]


def _readme_defaults() -> dict[str, str | None]:
    """``{NAME: default}`` of README's variable table (``None``: unset); a row may name two."""
    rows: dict[str, str | None] = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `") or len(cells) < 3:
            continue
        names = re.findall(r"`([A-Z_]+)`", cells[0])
        values: list[str | None] = [*re.findall(r"`([^`]*)`", cells[1])] or [None] * len(names)
        rows.update(zip(names, values[: len(names)], strict=True))
    return rows


QUOTA_DEFAULTS = {
    "QUOTA_PER_CALLER_PER_MINUTE": settings_module.DEFAULT_QUOTA_PER_CALLER_PER_MINUTE,
    "QUOTA_GLOBAL_PER_MINUTE": settings_module.DEFAULT_QUOTA_GLOBAL_PER_MINUTE,
}


def _as_default(name: str, documented: str) -> object:
    """The setting a documented default gives, read by the real parser."""
    settings = Settings.from_env({name: documented})
    attribute = settings_module._VARIABLES[name][0]
    return getattr(settings, attribute)


def test_the_defaults_env_example_states_are_the_settings_defaults() -> None:
    """Each ``NAME=value`` line of .env.example is the default itself (one source: the code)."""
    defaults = Settings()
    lines = (ROOT / ".env.example").read_text(encoding="utf-8").splitlines()
    stated = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert stated
    for name, value in stated.items():
        attribute = settings_module._VARIABLES[name][0]
        assert _as_default(name, value) == getattr(defaults, attribute), name


def test_the_defaults_the_readme_table_states_are_the_settings_defaults() -> None:
    defaults = Settings()
    rows = _readme_defaults()
    assert set(settings_module.VARIABLE_NAMES) <= set(rows)
    for name in settings_module.VARIABLE_NAMES:
        default = getattr(defaults, settings_module._VARIABLES[name][0])
        documented = rows[name]
        if documented is None:
            assert default in (None, ()), name
        elif default is None:  # quotas: the documented value is the one in force when on
            assert _as_default(name, documented) == QUOTA_DEFAULTS[name], name
        else:
            assert _as_default(name, documented) == default, name


@pytest.mark.parametrize(
    ("host", "added"),
    [
        ("127.0.0.2", ("127.0.0.2",)),
        ("[::1]", ()),
        ("::1", ()),
        ("127.0.0.1", ()),
        ("0.0.0.0", ()),  # noqa: S104 - a wildcard bind names no address a client calls
        ("::", ()),
        ("localhost", ()),
        ("10.0.0.5", ("10.0.0.5",)),
        ("fd00::5", ("[fd00::5]",)),
        ("::ffff:127.0.0.2", ()),  # IPv4-mapped: a client writes it otherwise
        ("fe80::1%eth0", ()),  # scoped: a client writes %25eth0 (RFC 6874)
    ],
)
def test_the_default_host_list_adds_the_ip_literal_served(
    host: str, added: tuple[str, ...]
) -> None:
    settings = Settings(host=host)
    assert settings.host_allow_list == (*settings.allowed_hosts, *added)


def test_a_host_list_the_operator_set_is_kept_exactly() -> None:
    settings = Settings.from_env({"ALLOWED_HOSTS": "booking.example.com", "HOST": "10.0.0.5"})
    assert settings.host_allow_list == ("booking.example.com",)
    narrower = Settings.from_env({"ALLOWED_HOSTS": "127.0.0.1,localhost", "HOST": "127.0.0.2"})
    assert narrower.host_allow_list == ("127.0.0.1", "localhost")


def test_the_default_list_in_another_order_or_case_is_still_the_default() -> None:
    env = {"ALLOWED_HOSTS": "LOCALHOST,[::1],127.0.0.1", "HOST": "127.0.0.2"}
    settings = Settings.from_env(env)
    assert settings.host_allow_list == ("LOCALHOST", "[::1]", "127.0.0.1", "127.0.0.2")
