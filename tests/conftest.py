"""Shared fixtures of the test suite: the devices to test on and a native-vs-reference runner.

Hypothesis runs with the ``pyskick`` profile below. The ``device`` fixture always yields
``"cpu"`` and adds ``"cuda"`` (marked ``cuda``) when a GPU is visible. A device whose native
kernels are missing fails loudly rather than skipping: on a GPU machine a build without CUDA
kernels is a broken build, not an untestable one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, settings

from pyskick import ops

# Generated inputs are tensors, slow to build on a loaded 2-core machine: that is not a test
# failure. CI (CI=true) replays a fixed sequence of examples so that a run is reproducible.
settings.register_profile(
    "pyskick",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("CI", "").lower() == "true",
)
settings.load_profile("pyskick")


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests never read or fill the user's cache (one-view models, sidekick scores); a test
    that needs a cache of its own sets ``PYSKICK_CACHE_DIR`` itself."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSKICK_CACHE_DIR", str(tmp_path_factory.mktemp("pyskick-cache")))
        yield


DEVICES = ["cpu"]
if torch.cuda.is_available():
    DEVICES.append(pytest.param("cuda", marks=pytest.mark.cuda))


def require_native(device: str) -> None:
    """Fail the calling test when ``device`` has no native kernels in this build."""
    if not ops.has_native():
        pytest.fail("the native module pyskick._C is not built: run `make setup`")
    if device.startswith("cuda") and not ops.has_cuda():
        pytest.fail(
            "a GPU is visible but pyskick._C was built without CUDA kernels "
            f"(build_info: {ops.build_info()})"
        )


@pytest.fixture(params=DEVICES, scope="session")
def device(request: pytest.FixtureRequest) -> str:
    """Device name to run an op on; session-scoped so that hypothesis tests may use it."""
    return request.param


@pytest.fixture(params=["native", "reference"], scope="session")
def backend(request: pytest.FixtureRequest, device: str) -> str:
    """Backend for tests that check both implementations against hand-computed results."""
    if request.param == "native":
        require_native(device)
    return request.param


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
