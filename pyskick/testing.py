"""A test kit for pyskick and for plugin packages: a pytest plugin.

Installing pyskick registers this module with pytest (the ``pytest11`` entry point, as datasette
ships one), so its fixtures are available in any test session without an import:

- ``one_thread``: torch on one thread for the test (tiny models only contend for more cores,
  and timings and results stay stable on a shared machine);
- ``tiny_scenes`` (session): the path of an HDF5 file of 40 synthetic scenes (SUN360's 4 x 8
  RGB views of 32 pixels; 32 train, 4 val, 4 test grids), seed 1;
- ``tiny_objects`` (session): the same for synthetic objects (ModelNet Hard's 5 x 9 gray
  views; the generator's ``--num 40``, split by object class: 23 / 3 / 6);
- ``tiny_config``: the ``cpu-demo`` TrainConfig at test size (batch 8, 2 pretraining epochs,
  1 policy epoch, on the CPU);
- ``tiny_one_view`` (session): a one-view run folder pretrained on ``tiny_scenes`` with
  ``tiny_config`` (what ``--init``, sidekicks and actors start from);
- ``cli_runner``: ``run(*args) -> (exit code, stdout, stderr)`` of the ``pyskick`` command,
  in-process, with the documented exit codes;
- ``device`` (session, parametrised): ``"cpu"``, and ``"cuda"`` (marked ``cuda``) when a GPU
  is visible. Everything else runs on the CPU: the kit sets ``$PYSKICK_AUTO_DEVICE=cpu`` for
  the session unless it is set, so ``device="auto"`` (every preset's) means the CPU in tests;
- ``backend`` (session, parametrised on ``device``): ``"native"`` and ``"reference"``, for
  tests that check a kernel's two implementations against hand-computed results;
- ``native_and_reference`` (session): ``run(op, *args, **kwargs) -> (native result, reference
  result)`` on ``device``. Both fail the test when ``device`` has no native kernels
  (:func:`require_native`): a comparison never degrades silently into reference against
  reference, and on a GPU machine a build without CUDA kernels is a broken build;
- ``run_python(*args, cwd=, ranks=)`` (a function): ``python *args`` in a fresh process,
  under ``torchrun --standalone --nproc-per-node ranks`` when ``ranks`` is given, failing the
  test with the tail of its stderr unless it exits 0;
- ``install_plugin``: ``install(plugin, name)`` registers a plugin object (a module or an
  object with ``@pyskick.hookimpl`` methods) in the plugin host that the library and the
  command line use, for the test only (a plugin defined inside a test, or one not installed).

A plugin's whole test of a tiny run then reads (docs/plugins.md, "Tests")::

    def test_my_sidekick_trains(tmp_path, tiny_scenes, tiny_one_view, cli_runner, one_thread):
        code, _, err = cli_runner("train", "--dataset", tiny_scenes, "--init", tiny_one_view,
                                  "--preset", "cpu-demo", "--batch-size", "8", "--epochs", "1",
                                  "--sidekick", "my-sidekick", "--out", tmp_path / "run")
        assert code == 0, err

Nothing heavy is imported when pytest loads the plugin: torch and the data generators load
when a fixture is first used.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyskick.config import TrainConfig

TINY_SCENES = 40
"""Grids in :func:`tiny_scenes` (32 train, 4 val, 4 test) and :func:`tiny_objects`."""
TINY_SEED = 1

CliRunner = Callable[..., tuple[int, str, str]]


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """torch on one thread inside the block (the previous count restored after)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch on one thread for the test: request it, or make it autouse in a conftest."""
    with single_thread():
        yield


def run_python(
    *args: str | os.PathLike[str], cwd: Path, ranks: int | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` in a fresh process (torch on one thread, warnings off, no
    ``WORLD_SIZE`` inherited), under ``torchrun --standalone --nproc-per-node ranks`` when
    ``ranks`` is given; fail the test with the tail of its stderr unless it exits 0.

    Returns:
        The finished process (its ``stdout`` and ``stderr`` as text).
    """
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("WORLD_SIZE", None)
    launcher = [] if ranks is None else [
        "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks)
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, *launcher, *map(str, args)],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd,
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"exit {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def _builtin(name: str, factory: pytest.TempPathFactory) -> Path:
    from pyskick.data.builtin import make_builtin

    return make_builtin(name, factory.mktemp(name) / f"{name}.h5", TINY_SCENES, TINY_SEED)


@pytest.fixture(scope="session")
def tiny_scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An HDF5 file of 40 synthetic scenes (32 train, 4 val, 4 test), seed 1."""
    return _builtin("synthetic-scenes", tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An HDF5 file of synthetic objects (``--num 40``, seed 1: 32 objects split by class into
    23 train, 3 val, 6 test)."""
    return _builtin("synthetic-objects", tmp_path_factory)


def tiny_train_config() -> TrainConfig:
    """``cpu-demo`` at test size: batch 8, 2 pretraining epochs, 1 policy epoch, on the CPU
    (on every machine, so that results compare across machines)."""
    from pyskick.config import train_preset

    return train_preset("cpu-demo").replace(batch_size=8, pretrain_epochs=2, epochs=1, device="cpu")


@pytest.fixture
def tiny_config() -> TrainConfig:
    """:func:`tiny_train_config` (a fresh one per test)."""
    return tiny_train_config()


@pytest.fixture(scope="session")
def tiny_one_view(tmp_path_factory: pytest.TempPathFactory, tiny_scenes: Path) -> Path:
    """A one-view run folder pretrained on :func:`tiny_scenes` with :func:`tiny_config`."""
    from pyskick.training import TrainData, pretrain

    with single_thread():
        data = TrainData.from_file(tiny_scenes)
        return pretrain(tiny_train_config(), tmp_path_factory.mktemp("one-view"), data).run_dir


@pytest.fixture
def cli_runner() -> CliRunner:
    """``run(*args) -> (code, stdout, stderr)``: the ``pyskick`` command in this process,
    arguments converted with ``str`` (paths welcome)."""
    from pyskick_cli.main import main

    def run(*args: object) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            else:  # pragma: no cover - main always exits
                code = 0
        return code, out.getvalue(), err.getvalue()

    return run


@pytest.fixture
def install_plugin(monkeypatch: pytest.MonkeyPatch) -> Callable[[object, str], None]:
    """``install(plugin, name)``: ``plugin`` registered, for this test, in a fresh plugin host
    (the built-ins and the installed plugins) that replaces the process-wide one."""
    from pyskick import plugins

    host = plugins.make_plugin_host()
    monkeypatch.setattr(plugins, "get_host", lambda: host)

    return host.register


AUTO_DEVICE_ENV = "PYSKICK_AUTO_DEVICE"
""":data:`pyskick.distributed.AUTO_DEVICE_ENV` (named here: loading the kit imports no torch)."""

_auto_device_before: list[str | None] = []


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``cuda`` marker of :func:`device`'s GPU parameter, and keep ``device="auto"``
    on the CPU for the session, its subprocesses included (``$PYSKICK_AUTO_DEVICE=cpu`` unless
    the caller set it): a test on a GPU machine then computes what it computes on any other
    machine, and a test meant for the GPU asks for it (the ``device`` fixture's ``cuda``)."""
    config.addinivalue_line("markers", "cuda: needs a CUDA device")
    _auto_device_before.append(os.environ.get(AUTO_DEVICE_ENV))
    if not os.environ.get(AUTO_DEVICE_ENV):  # empty counts as unset, as in resolve_device
        os.environ[AUTO_DEVICE_ENV] = "cpu"


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give ``$PYSKICK_AUTO_DEVICE`` back its value from before the session."""
    if not _auto_device_before:
        return
    before = _auto_device_before.pop()
    if before is None:
        os.environ.pop(AUTO_DEVICE_ENV, None)
    else:
        os.environ[AUTO_DEVICE_ENV] = before


def _devices() -> list[Any]:
    import torch

    devices: list[Any] = ["cpu"]
    if torch.cuda.is_available():
        devices.append(pytest.param("cuda", marks=pytest.mark.cuda))
    return devices


def require_native(device: str) -> None:
    """Fail the calling test when ``device`` has no native kernels in this build."""
    from pyskick import ops

    if not ops.has_native():
        pytest.fail("the native module pyskick._C is not built: run `make setup`")
    if device.startswith("cuda") and not ops.has_cuda():
        pytest.fail(
            "a GPU is visible but pyskick._C was built without CUDA kernels "
            f"(build_info: {ops.build_info()})"
        )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise the ``device`` fixture with the devices of this machine (decided when the
    tests are collected, so that torch is imported only by sessions that use it)."""
    if "device" in metafunc.fixturenames and "device" not in {
        name
        for marker in metafunc.definition.iter_markers("parametrize")
        for name in (
            marker.args[0].split(",") if isinstance(marker.args[0], str) else marker.args[0]
        )
    }:
        metafunc.parametrize("device", _devices(), indirect=True, scope="session")


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> str:
    """Device name to run an op on; session-scoped so that hypothesis tests may use it."""
    return str(request.param)


@pytest.fixture(params=["native", "reference"], scope="session")
def backend(request: pytest.FixtureRequest, device: str) -> str:
    """Backend for tests that check both implementations against hand-computed results."""
    if request.param == "native":
        require_native(device)
    return str(request.param)


NativeAndReference = Callable[..., tuple[Any, Any]]


@pytest.fixture(scope="session")
def native_and_reference(device: str) -> NativeAndReference:
    """``run(op, *args, **kwargs) -> (native result, reference result)`` on ``device``.

    Fails the test (see :func:`require_native`) when ``device`` has no native kernels, so a
    comparison can never silently degrade into reference-vs-reference.
    """
    require_native(device)

    def run(op: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        native = op(*args, backend="native", **kwargs)
        reference = op(*args, backend="reference", **kwargs)
        return native, reference

    return run
