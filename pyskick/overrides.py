"""What an extension class implements: the one test of whether it replaces a base method.

A plugin's class says what it provides by overriding methods of its base (an actor that forces
motions overrides ``forced_actions``, a sidekick that demonstrates overrides
``demonstrations``). :func:`overrides` compares the class's method with the one its root class
declares, so the caller does not need to import the base (a bottom-layer module, no import).
"""

from __future__ import annotations


def overrides(obj: object, method: str) -> bool:
    """Whether ``obj``'s class replaces ``method`` of the most basic class of its hierarchy
    that declares it (``object`` aside).

    Args:
        obj: an instance of an extension class (an actor, a sidekick, ...).
        method: the method's name.

    Raises:
        AttributeError: no class of ``obj``'s hierarchy declares ``method``.
    """
    declared = [c for c in type(obj).__mro__ if c is not object and method in vars(c)]
    if not declared:
        raise AttributeError(f"{type(obj).__qualname__} has no method {method!r}")
    return getattr(type(obj), method) is not vars(declared[-1])[method]
