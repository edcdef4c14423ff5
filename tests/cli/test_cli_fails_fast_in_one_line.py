"""A command that cannot start says why in one line naming the variable, and exits non-zero
within a bounded time; each command reaches only the services it uses; any user id runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.contract.settings import RENAMED, Settings, SettingsError, load_settings
from controller.testing.ports import free_port
from controller.testing.processes import run_cli

pytestmark = pytest.mark.slow


def run(
    args: list[str], tmp_path: Path, timeout_s: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    """The CLI with only ``env`` set (no MPIJC_ variables inherited), from ``tmp_path``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    clean.update({"MPIJC_EMBEDDED__DATA_DIR": str(tmp_path / "data"), **env})
    return run_cli(args, clean, tmp_path, timeout_s=timeout_s)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{result.stderr}"
    return lines[0]


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"MPIJC_API__PORT": "abc"}, "MPIJC_API__PORT: Input should be a valid integer"),
        ({"MPIJC_NOTIFY__ALLOW_CIDRS": "10.0.0.0/8"}, "MPIJC_NOTIFY__ALLOW_CIDRS: not valid JSON"),
        ({"MPIJC_DATABSE__URL": "postgresql://x"}, "MPIJC_DATABSE__URL (did you mean MPIJC_DATABASE__URL?)"),
        ({"MPIJC_STARTUP_TIMEOUT_S": "0"}, "MPIJC_STARTUP_TIMEOUT_S: Input should be greater than 0"),
        (
            {"MPIJC_API__MAX_BODY_BYTES": "-1"},
            "MPIJC_API__MAX_BODY_BYTES: Input should be greater than or equal",
        ),
        ({"MPIJC_NOTIFY__ALLOW_PORTS": "[443, 70000]"}, "MPIJC_NOTIFY__ALLOW_PORTS"),
        (
            {"MPIJC_CONSUMER__PULL_WAIT_S": "10", "MPIJC_CONSUMER__PULL_HEARTBEAT_S": "6"},
            "MPIJC_CONSUMER__PULL_HEARTBEAT_S: Value error, at most half of pull_wait_s (10)",
        ),
        ({"MPIJC_CONSUMER__BATCH_TIMEOUT_S": "0.01"}, "MPIJC_CONSUMER__BATCH_TIMEOUT_S"),
        (
            {"MPIJC_AUDIT__WEBHOOK_PORT": "8443"},
            "unknown setting MPIJC_AUDIT__WEBHOOK_PORT (renamed MPIJC_ADMISSION__PORT)",
        ),
        ({"MPIJC_API__METRICS_PORT": "9464"}, "MPIJC_API__METRICS_PORT (renamed MPIJC_METRICS__PORT)"),
        (
            {"MPIJC_USAGE__URL": "prometheus:9090"},
            "MPIJC_USAGE__URL: Value error, 'prometheus:9090' is not an http",
        ),
        ({"MPIJC_USAGE__POD_LABEL": "exported-pod"}, "MPIJC_USAGE__POD_LABEL: String should match pattern"),
        (
            {"MPIJC_API__PORT": "8480", "MPIJC_API__FORWARDED_TOKEN_PORT": "8480"},
            "MPIJC_API__FORWARDED_TOKEN_PORT: Value error, the OAuth proxy's loopback listener needs a port",
        ),
        (
            {"MPIJC_API__FORWARDED_TOKEN_AUDIENCES": '[""]'},
            "MPIJC_API__FORWARDED_TOKEN_AUDIENCES: Value error, an audience is a non-empty string",
        ),
    ],
    ids=[
        "not-an-integer",
        "list-not-json",
        "misspelled",
        "out-of-range",
        "limit-negative",
        "port-too-high",
        "heartbeat-longer-than-the-wait",
        "setting-of-earlier-versions",
        "renamed-to-the-admission-group",
        "renamed-to-the-metrics-group",
        "prometheus-url-without-scheme",
        "not-a-label-name",
        "proxy-listener-on-the-api-port",
        "empty-forwarded-audience",
    ],
)
def test_bad_settings_are_one_line_naming_the_variable(
    env: dict[str, str], says: str, tmp_path: Path
) -> None:
    assert says in one_line(run(["history"], tmp_path, **env))


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_a_variable_of_an_earlier_version_names_its_new_name(old: str, new: str) -> None:
    with pytest.raises(SettingsError, match=rf"^unknown setting {old} \(renamed {new}\);"):
        load_settings({old: "1"})
    group, field = new.removeprefix("MPIJC_").lower().split("__")
    assert field in getattr(Settings.model_fields[group].annotation, "model_fields", {}), new


def test_an_unreachable_nats_is_one_line_after_the_startup_timeout(tmp_path: Path) -> None:
    (tmp_path / "none.jsonl").write_text("")
    result = run(
        ["replay", str(tmp_path / "none.jsonl")],
        tmp_path,
        MPIJC_NATS__URL=f"nats://127.0.0.1:{free_port()}",
        MPIJC_STARTUP_TIMEOUT_S="2",
    )
    line = one_line(result)
    assert "MPIJC_NATS__URL" in line and "did not answer within 2 s" in line
    assert "Traceback" not in result.stdout + result.stderr


def test_an_unreachable_database_is_one_line_after_the_startup_timeout(tmp_path: Path) -> None:
    result = run(
        ["history"],
        tmp_path,
        MPIJC_DATABASE__URL=f"postgresql://nobody@127.0.0.1:{free_port()}/none",
        MPIJC_STARTUP_TIMEOUT_S="2",
    )
    line = one_line(result)
    assert "MPIJC_DATABASE__URL" in line and "did not answer within 2 s" in line
    assert "Traceback" not in result.stdout + result.stderr


def test_reading_the_history_needs_no_nats(settings: Settings, tmp_path: Path) -> None:
    assert settings.database.url is not None
    result = run(
        ["history"],
        tmp_path,
        MPIJC_DATABASE__URL=settings.database.url.get_secret_value(),
        MPIJC_DATABASE__SINGLE_ROLE="true",
        MPIJC_NATS__URL=f"nats://127.0.0.1:{free_port()}",  # nothing listens: it must not be asked
        MPIJC_STARTUP_TIMEOUT_S="2",
    )
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "data").exists(), "no embedded service may start for a command that needs none"


def test_verifying_the_audit_trail_needs_no_nats(settings: Settings, tmp_path: Path) -> None:
    assert settings.database.url is not None
    result = run(
        ["audit", "verify"],
        tmp_path,
        MPIJC_DATABASE__URL=settings.database.url.get_secret_value(),
        MPIJC_DATABASE__SINGLE_ROLE="true",
        MPIJC_NATS__URL=f"nats://127.0.0.1:{free_port()}",
        MPIJC_STARTUP_TIMEOUT_S="2",
    )
    assert result.returncode == 0, result.stderr


SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs setpriv and root to switch user id")
def test_any_command_runs_as_a_user_id_without_a_passwd_entry(settings: Settings, tmp_path: Path) -> None:
    """Containers run as an arbitrary uid with group 0 and no passwd entry (OpenShift, USER 10001:0)."""
    assert SETPRIV is not None and settings.database.url is not None
    uid = 10_001
    with pytest.raises(KeyError):
        import pwd

        pwd.getpwuid(uid)
    tmp_path.chmod(0o777)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/",
        "MPIJC_DATABASE__URL": settings.database.url.get_secret_value(),
        "MPIJC_DATABASE__SINGLE_ROLE": "true",
        "MPIJC_EMBEDDED__DATA_DIR": str(tmp_path / "data"),
    }
    as_user = [
        SETPRIV,
        "--reuid",
        str(uid),
        "--regid",
        "0",
        "--clear-groups",
        sys.executable,
        "-m",
        "controller.cli",
    ]
    for args in (["--help"], ["--version"], ["consume", "--help"], ["history"]):
        result = subprocess.run(
            [*as_user, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, f"{args}: {result.stderr}"
        assert "getpwuid" not in result.stderr


def test_up_without_a_cluster_says_so_in_one_line_and_stops(tmp_path: Path) -> None:
    """Before, its watchers printed a KubeConfigError traceback every few seconds, forever."""
    result = run(["up"], tmp_path, KUBECONFIG=str(tmp_path / "absent"), HOME=str(tmp_path))

    line = one_line(result)
    assert line.startswith("mpijob-controller up: MPIJC_KUBE__KUBECONFIG: no Kubernetes cluster to watch")
    assert "make demo" in line
    assert not (tmp_path / "data").exists()  # it stopped before starting any service
