"""``examples/client.ipynb`` runs, cell by cell on a real Jupyter kernel, against the demo's data
served by ``demo --serve`` (over this test's PostgreSQL and NATS), as a newcomer would run it from
the repository's root; what each cell prints is what the demo's story says: ``team-a/train`` failed
its first attempt with a CUDA out-of-memory error and succeeded its second."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from controller.contract.settings import ClientSettings, Settings
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "client.ipynb"


def printed(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """What each tagged code cell printed (its stream outputs), by tag; an error output fails."""
    said: dict[str, str] = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{cell.metadata.tags}: {errors}"
        text = "".join(o.text for o in cell.outputs if o.output_type == "stream")
        said[cell.metadata.tags[0]] = text
    return said


def test_the_notebook_is_saved_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)
    assert all(len(cell.metadata.get("tags", ())) == 1 for cell in code), "each code cell tagged once"


@pytest.mark.slow
@pytest.mark.skipif(
    Path(ClientSettings().token_file).exists(), reason="a pod's token is there: the client would send it"
)
def test_the_example_notebook_runs_on_the_served_demo(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = cli_env(settings, tmp_path / ".mpijc", MPIJC_API__PORT=str(port), MPIJC_CLIENT__API_URL=url)
    log = tmp_path / "serve.log"
    serving = start_cli(["demo", "--serve"], env, tmp_path, log)
    try:
        deadline = time.monotonic() + 120
        while "serving the demo's data" not in log.read_text():
            assert serving.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        notebook = nbformat.read(NOTEBOOK, as_version=4)
        kernel_env = {
            **os.environ,
            "MPIJC_CLIENT__API_URL": url,  # the token: .mpijc/api-token where the kernel runs
            "JUPYTER_PLATFORM_DIRS": "1",
            "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter"),
        }
        runner = NotebookClient(
            notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        runner.execute(env=kernel_env)
    finally:
        serving.terminate()
        serving.wait(30)

    said = printed(notebook)
    assert said["connect"] == ""
    assert "team-a/train attempt 1: MPIJob Failed\n" in said["runs"]
    assert said["root-cause"].startswith("train attempt 1 is Failed\nroot cause (gpu-oom, critical): ")
    assert "CUDA out of memory" in said["root-cause"] and "\n  - " in said["root-cause"]
    assert "[rank 18] [1,18]<stderr>:torch.OutOfMemoryError: CUDA out of memory." in said["logs"]
    assert said["compare"].startswith("Failed -> Succeeded\n")
    assert len(said["compare"].splitlines()) > 1, "the attempts' specs differ"
    assert said["async"] == "attempt 2 is Succeeded\n"
    assert said["errors"].startswith("exit 1 (FAILED): team-a/train attempt 1 is Failed: root cause (gpu-oom")
