"""Does a native binding's ValueError reach Python? Each case in its own process.

On the H100 image (2026-11-27) pytest-xdist workers died of a segmentation fault in tests where
a binding of ``pyskick._C`` throws ``std::invalid_argument`` (a ValueError for Python), tests
that pass on every CPU machine. The second run found the pattern: every message that held a
number crashed (then built with ``std::ostringstream``), every message of text alone did not;
the messages are built without iostreams since (csrc/common/checks.h). This probe narrows it
down: the same bad call in a fresh process, after ``import torch``, after CUDA started, after a
CUDA kernel of pyskick ran, and with a number in its message; a case that crashes is rerun
under gdb when the machine has it, for the native backtrace.

    python3 throw_probe.py            # one line per case, then any backtraces
"""

from __future__ import annotations

import shutil
import subprocess
import sys

BAD_CALL = """
import pyskick._C as C
try:
    C.nms_rewards_cpu(0, 0, 1, 1, 1, 1, 1)
except ValueError as exc:
    print("ValueError:", str(exc)[:60])
"""
CASES = {
    "fresh": BAD_CALL,
    "after import torch": "import torch\n" + BAD_CALL,
    "after CUDA init": "import torch\ntorch.zeros(1, device='cuda')\n" + BAD_CALL,
    "after a pyskick CUDA kernel": (
        "import torch\nfrom pyskick.ops import nms_rewards\n"
        "nms_rewards(torch.rand(2, 4, 8, device='cuda'), k=2, radius=1)\n"
        "torch.cuda.synchronize()\n" + BAD_CALL
    ),
    # The second run (2026-11-27) crashed exactly the messages that held a number (formatted by
    # std::ostringstream then; by std::to_string/snprintf since): one such message each way.
    "a message with a number": (
        "import torch\nimport pyskick._C as C\n"
        "try:\n    C.set_num_threads(0)\n"
        "except ValueError as exc:\n    print('ValueError:', str(exc)[:60])\n"
    ),
    "a number after torch's CUDA": (
        "import torch\nimport pyskick._C as C\ntorch.zeros(1, device='cuda')\n"
        "p = torch.zeros(8).data_ptr()\n"
        "try:\n    C.nms_rewards_cpu(p, p, 1, 1, 1, -1, 1)\n"
        "except ValueError as exc:\n    print('ValueError:', str(exc)[:60])\n"
    ),
    "a CUDA binding's own check": (
        "import torch\nimport pyskick._C as C\ntorch.zeros(1, device='cuda')\n"
        "try:\n    C.nms_rewards_cuda(0, 0, 1, 1, 1, 1, 1, 0)\n"
        "except ValueError as exc:\n    print('ValueError:', str(exc)[:60])\n"
    ),
    # A check of the caller's values in a CUDA launch (PYSKICK_CHECK_INPUT: the grid is too
    # large for the kernel's shared memory), raised as pyskick._C.InputError -> UserError.
    "a CUDA kernel's InputError": (
        "import torch\nfrom pyskick.errors import UserError\nfrom pyskick.ops import nms_rewards\n"
        "try:\n    nms_rewards(torch.rand(1, 256, 256, device='cuda'), 2, 1, backend='native')\n"
        "except UserError as exc:\n    print('UserError:', str(exc)[:60])\n"
    ),
}


def main() -> int:
    crashed = []
    for name, code in CASES.items():
        run = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        last = (run.stdout.strip().splitlines() or run.stderr.strip().splitlines() or [""])[-1]
        print(f"{name:30s} rc={run.returncode:4d}  {last[:90]}")
        if run.returncode < 0 or run.returncode > 1:
            crashed.append(code)
    gdb = shutil.which("gdb")
    for code in crashed[:2]:
        if gdb is None:
            print("no gdb on this machine: no native backtrace")
            break
        trace = subprocess.run(
            [gdb, "-batch", "-ex", "run", "-ex", "bt 25", "--args", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        print("\n".join(trace.stdout.splitlines()[-30:]))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
