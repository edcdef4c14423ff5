"""On OpenShift the pages are reached through OpenShift's OAuth proxy, a sidecar that signs the user
in and hands each request on to the API's loopback listener (``MPIJC_API__FORWARDED_TOKEN_PORT``)
with the user's OAuth access token in ``X-Forwarded-Access-Token``. Such a token carries no
audience, so it is reviewed with ``MPIJC_API__FORWARDED_TOKEN_AUDIENCES`` (none here: the API
server's own), while the API's port keeps ``MPIJC_API__TOKEN_AUDIENCES``.

Everything runs for real but the proxy: the ``mpijob-controller api`` process (kubernetes mode,
TokenReviews and SubjectAccessReviews answered by the simulated API server, which checks audiences
as the real one does) and, in front of it, a reverse proxy process doing what oauth-proxy does with
the overlay's flags (:mod:`controller.testing.oauthproxy`: no oauth-proxy binary can be installed
here)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.testing.oauthproxy import COOKIE, PING
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.api_fixtures import T0, bearer, insert_runs, run_row
from tests.live_events import of_type, read_events
from tests.processes import stop

AUDIENCE = "mpijob-controller"
ALICE = {"username": "alice", "uid": "u-alice", "groups": ["system:authenticated:oauth"]}
OAUTH_TOKEN = "sha256~alice-openshift-oauth-token"
"""An OpenShift OAuth access token: valid for the API server's own audience only."""
SESSION = "alice-session"
TEAM_A = run_row("team-a", "resnet", T0)
TEAM_B = run_row("team-b", "secret-llm", T0)


class Stack:
    """The API process and the proxy in front of it."""

    def __init__(self, api_port: int, loopback_port: int, proxy_port: int) -> None:
        self.api = f"http://127.0.0.1:{api_port}"
        self.loopback = f"http://127.0.0.1:{loopback_port}"
        self.proxy = f"http://127.0.0.1:{proxy_port}"

    def signed_in(self) -> httpx.AsyncClient:
        """A browser that signed in with OpenShift through the proxy."""
        return httpx.AsyncClient(base_url=self.proxy, cookies={COOKIE: SESSION}, timeout=30)


@pytest.fixture
def proxy_process(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """The proxy (port, upstream port) in front of the API's loopback listener."""
    port, upstream = free_port(), free_port()
    sessions = tmp_path / "sessions.json"
    sessions.write_text(json.dumps({SESSION: {"user": "alice", "token": OAUTH_TOKEN}}))
    args = ["--port", str(port), "--upstream", f"http://127.0.0.1:{upstream}", "--sessions", str(sessions)]
    with (tmp_path / "proxy.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "controller.testing.oauthproxy", *args], stdout=log, stderr=log
        )
    try:
        yield port, upstream
    finally:
        stop(process)


@pytest.fixture
async def stack(
    sim: SimCluster,
    settings: Settings,
    engine: AsyncEngine,
    tmp_path: Path,
    proxy_process: tuple[int, int],
) -> AsyncIterator[Stack]:
    await insert_runs(engine, [TEAM_A, TEAM_B])
    sim.set_access({OAUTH_TOKEN: ALICE}, [("alice", "mpijobs", "team-a")])
    proxy_port, loopback_port = proxy_process
    served = Stack(free_port(), loopback_port, proxy_port)
    env = cli_env(
        settings,
        tmp_path,
        MPIJC_KUBE__KUBECONFIG=str(sim.kubeconfig(tmp_path / "kubeconfig")),
        MPIJC_API__AUTH="kubernetes",
        MPIJC_API__TOKEN_AUDIENCES=json.dumps([AUDIENCE]),
        MPIJC_API__PORT=served.api.rsplit(":", 1)[1],
        MPIJC_API__FORWARDED_TOKEN_PORT=str(loopback_port),
        MPIJC_API__FORWARDED_TOKEN_AUDIENCES="[]",
    )
    api = start_cli(["api"], env, tmp_path, tmp_path / "api.log")
    try:
        async with httpx.AsyncClient(timeout=30) as client:

            async def up() -> bool:
                try:
                    urls = (
                        f"{served.api}/api/v1/runs",
                        f"{served.loopback}/api/v1/runs",
                        served.proxy + PING,
                    )
                    return all([(await client.get(url)).status_code in {200, 401} for url in urls])
                except httpx.TransportError:
                    return api.poll() is not None  # ended: the assertion below says why

            await until(up, 60, lambda: (tmp_path / "api.log").read_text()[-3000:], interval_s=0.2)
            assert api.poll() is None, (tmp_path / "api.log").read_text()[-3000:]
        yield served
    finally:
        stop(api)


@pytest.mark.slow
async def test_through_the_proxy_a_forwarded_oauth_token_reads_its_namespaces_pages_and_streams(
    stack: Stack,
) -> None:
    async with stack.signed_in() as browser:
        answer = await browser.get("/api/v1/runs")
        assert answer.status_code == 200, answer.text
        assert [(r["namespace"], r["name"]) for r in answer.json()["items"]] == [("team-a", "resnet")]
        jobs = await browser.get("/ui/jobs")
        assert jobs.status_code == 200, jobs.text
        assert "Signed in as <strong>alice</strong>" in jobs.text
        assert "resnet" in jobs.text and "secret-llm" not in jobs.text
        # the session is the proxy's: signing out ends it there, not only the API's own cookie
        assert 'href="/oauth/sign_out"' in jobs.text and "/ui/sign-out" not in jobs.text
        run = await browser.get(f"/ui/runs/{TEAM_A['uid']}")
        assert run.status_code == 200 and "resnet" in run.text
        other = await browser.get(f"/ui/runs/{TEAM_B['uid']}")
        assert other.status_code == 404 and "secret-llm" not in other.text
        # a forwarded token reads but never changes anything, as the pages' cookie
        hook = {"channel": "webhook", "url": "https://hooks.example/x", "namespace": "team-a"}
        change = await browser.post("/api/v1/webhooks", json=hook)
        assert change.status_code == 401 and "never changes" in change.json()["detail"], change.text
    # the run page's live stream passes the proxy too, and ends as a finished run's does
    session = {"Cookie": f"{COOKIE}={SESSION}"}
    events = await read_events(f"{stack.proxy}/api/v1/runs/{TEAM_A['uid']}/events", session, of_type("end"))
    assert events[-1].data["phase"] == "Succeeded"
    async with httpx.AsyncClient(base_url=stack.proxy, timeout=30) as stranger:
        assert (await stranger.get("/ui/jobs")).status_code == 403  # the proxy signs them in first


@pytest.mark.slow
async def test_around_the_proxy_the_same_token_and_the_header_are_refused(stack: Stack) -> None:
    async with stack.signed_in() as browser:  # accepted through the proxy first: its answer is cached
        assert (await browser.get("/api/v1/runs")).status_code == 200
    async with httpx.AsyncClient(timeout=30) as client:
        for base in (stack.api, stack.loopback):  # a bearer is a bearer, whichever port it reaches
            answer = await client.get(f"{base}/api/v1/runs", headers=bearer(OAUTH_TOKEN))
            assert answer.status_code == 401, (base, answer.text)
            assert answer.json()["detail"] == "the bearer token was not accepted"
        forwarded = {"X-Forwarded-Access-Token": OAUTH_TOKEN}  # from anyone but the proxy
        answer = await client.get(f"{stack.api}/api/v1/runs", headers=forwarded)
        assert answer.status_code == 401
        assert "MPIJC_API__FORWARDED_TOKEN_PORT" in answer.json()["detail"]
