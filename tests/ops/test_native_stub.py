"""``pyskick/_C.pyi`` declares exactly what the compiled ``pyskick._C`` exposes.

pybind11 writes each function's signature as the first line of its docstring, e.g.
``nms_rewards_cpu(scores: int, ...) -> None``; that line and the stub's ``def`` are both parsed
with :mod:`ast` and compared by function name, argument names and return type (types of the
arguments are left out: pybind11 spells ``int`` differently from version to version).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

import pyskick
from pyskick import ops

STUB = Path(pyskick.__file__).with_name("_C.pyi")

Signature = tuple[tuple[str, ...], str]  # (argument names, return type without parameters)


def _signature(function: ast.FunctionDef) -> Signature:
    arguments = function.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    returns = ast.unparse(function.returns) if function.returns else "None"
    return tuple(names), returns.split("[")[0]


def stub_signatures() -> dict[str, Signature]:
    """The functions declared in ``_C.pyi``."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    return {node.name: _signature(node) for node in tree.body if isinstance(node, ast.FunctionDef)}


def native_signatures(module: ModuleType) -> dict[str, Signature]:
    """The functions of the compiled module, from the signature line pybind11 writes."""
    found = {}
    for name in dir(module):
        function = getattr(module, name)
        if name.startswith("_") or not callable(function) or isinstance(function, type):
            continue  # private names, data, and the exception class InputError
        line = (function.__doc__ or "").splitlines()[0]
        assert line.startswith(f"{name}("), f"{name}: no pybind11 signature in {line!r}"
        definition = ast.parse(f"def {line}: ...").body[0]
        assert isinstance(definition, ast.FunctionDef)
        found[name] = _signature(definition)
    return found


@pytest.fixture(scope="module")
def native() -> ModuleType:
    if not ops.has_native():
        pytest.fail("pyskick._C is missing: run `make setup`")
    return importlib.import_module("pyskick._C")


def test_the_stub_declares_every_native_function(native: ModuleType) -> None:
    stub, compiled = stub_signatures(), native_signatures(native)
    assert sorted(set(compiled) - set(stub)) == [], "functions missing from _C.pyi"
    for name, signature in compiled.items():
        assert stub[name] == signature, f"{name}: _C.pyi declares {stub[name]}, _C has {signature}"


def test_every_stub_function_is_compiled(native: ModuleType) -> None:
    """Only the CUDA entry points may be missing, and only from a build without CUDA."""
    compiled = native_signatures(native)
    missing = sorted(set(stub_signatures()) - set(compiled))
    if native.has_cuda():
        assert missing == []
    else:
        assert set(missing) <= {f"{op}_cuda" for op in ops.OPS}, missing


def test_cuda_entry_points_take_the_cpu_arguments_and_the_stream() -> None:
    stub = stub_signatures()
    with_cuda = [op for op in ops.OPS if f"{op}_cuda" in stub]
    assert with_cuda, "_C.pyi declares no CUDA entry point"
    for op in with_cuda:
        cpu_args, _ = stub[f"{op}_cpu"]
        args, returns = stub[f"{op}_cuda"]
        assert args == (*cpu_args, "stream"), op
        assert returns == "None", f"{op}_cuda: CUDA launches are asynchronous and return nothing"


def test_every_op_has_a_cpu_entry_point() -> None:
    """The ops of pyskick.ops are the ``<op>_cpu`` functions of the stub, and no others; every
    other function is an ``<op>_cuda`` entry point or a module-level helper."""
    stub = stub_signatures()
    assert sorted(n.removesuffix("_cpu") for n in stub if n.endswith("_cpu")) == sorted(ops.OPS)
    entry_points = {f"{op}_{device}" for op in ops.OPS for device in ("cpu", "cuda")}
    helpers = {"build_info", "has_cuda", "get_num_threads", "set_num_threads"}
    assert set(stub) - entry_points == helpers


def test_the_comparison_sees_a_difference() -> None:
    """A renamed argument or a different return type is a mismatch (the checks can fail)."""
    stub = stub_signatures()
    line = "nms_rewards_cpu(scores: int, out: int, B: int, N: int, M: int, k: int, r: int) -> None"
    definition = ast.parse(f"def {line}: ...").body[0]
    assert isinstance(definition, ast.FunctionDef)
    assert _signature(definition) != stub["nms_rewards_cpu"]
    assert _signature(definition)[0][:-1] == stub["nms_rewards_cpu"][0][:-1]
