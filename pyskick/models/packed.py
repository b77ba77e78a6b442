"""R runs of one architecture as one model (docs/training.md, "Packed runs").

Table 1 is several methods times several seeds of the *same* network. Trained one after the
other, each run launches hundreds of small kernels per step and leaves a GPU mostly idle;
packed, every layer of the R runs is one kernel: convolutions and transposed convolutions are
grouped (``groups=R``; on the CPU they run run by run, :data:`PACKED_CONVS`), linear layers
and the LSTM cell are batched matrix products, and each BatchNorm normalises each run's
features over that run's samples only. Parameters carry a
leading run dimension ``R`` and keep the names of :class:`~pyskick.models.CompletionPolicy`'s,
so :func:`pack` and :func:`unpack` are copies of state dicts, exact both ways.

**Episode order.** A packed model runs ``B`` episodes of each of its ``R`` runs, interleaved
batch-major: episode ``e = b * R + r`` is run r's b-th. Its inputs and outputs are those of
``CompletionPolicy`` for ``B * R`` episodes, so the environment and
:func:`~pyskick.envs.rollout.collect_rollout` run it unchanged, and a view batch
``[B * R, C, H, W]`` *is* ``[B, R * C, H, W]``, the layout of a grouped convolution (no copy
on the way in, nor on the way out of the decoder; run by run, each layer slices its input and
concatenates its outputs). Vectors (``[R, B, F]``) are transposed
between the two layouts where needed; they are small. The recurrent state is kept as
``[R, B, hidden]`` (opaque to the rollout).

``nn.LSTM`` has no batching rule for ``torch.func.vmap``; these layers need none.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Literal, cast, overload

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pyskick.models.config import ModelConfig
from pyskick.models.critics import (
    FullObservabilityCritic,
    GroupViews,
    PartialObservabilityCritic,
    full_critic_inputs,
)
from pyskick.models.decode import L1_EPS, glimpse_batch_norm
from pyskick.models.inputs import (
    act_input,
    check_float_tensor,
)
from pyskick.models.policy import (
    CompletionPolicy,
    FreezableSenseAndFuse,
    FrozenBatchNorm,
    StepOutput,
    autocast_state,
)

__all__ = [
    "PACKED_CONVS",
    "PackedCompletionPolicy",
    "PackedConvs",
    "PackedFullObservabilityCritic",
    "PackedPartialObservabilityCritic",
    "episodes_first",
    "interleave_demonstrations",
    "pack",
    "pack_state",
    "runs_first",
    "set_packed_convs",
    "unpack",
    "unpack_into",
    "unpack_state",
]


# ----------------------------------------------------------------------------- layouts
def runs_first(x: Tensor, runs: int) -> Tensor:
    """``[B * R, ...]`` (episode ``b * R + r``) as ``[R, B, ...]`` (a view)."""
    return x.reshape(-1, runs, *x.shape[1:]).transpose(0, 1)


def episodes_first(x: Tensor) -> Tensor:
    """``[R, B, ...]`` as ``[B * R, ...]`` (episode ``b * R + r``)."""
    return x.transpose(0, 1).reshape(-1, *x.shape[2:])


def interleave_demonstrations(
    per_run: Sequence[tuple[Tensor, Tensor] | None], steps: int, B: int, device: torch.device
) -> tuple[Tensor, Tensor] | None:
    """R runs' ``(actions, mask)`` ``[steps, B]`` (or None: a run forcing none) as one
    ``(actions, mask)`` ``[steps, B * R]`` in the packed order, unmasked zeros for the runs
    without; None when no run has any (one run's are returned as they are)."""
    if len(per_run) == 1 or all(d is None for d in per_run):
        return per_run[0] if len(per_run) == 1 else None
    none = torch.zeros(steps, B, dtype=torch.int64, device=device)
    actions = torch.stack([none if d is None else d[0] for d in per_run], dim=2)
    masks = torch.stack([none.bool() if d is None else d[1] for d in per_run], dim=2)
    return actions.reshape(steps, -1), masks.reshape(steps, -1)


# ------------------------------------------------------------------------------ layers
class PackedLinear(nn.Module):
    """R linear layers: ``[R, B, in] -> [R, B, out]`` (one batched matrix product).

    Parameters ``weight [R, out, in]``, ``bias [R, out]``.
    """

    def __init__(self, runs: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(runs, out_features, in_features))
        self.bias = nn.Parameter(torch.empty(runs, out_features))

    def forward(self, x: Tensor) -> Tensor:
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))


PackedConvs = Literal["auto", "grouped", "per-run"]
PACKED_CONVS: tuple[PackedConvs, ...] = ("auto", "grouped", "per-run")
"""How a pack computes its convolutions (:func:`set_packed_convs`): ``"grouped"``, one
grouped call per layer for all runs (``groups=R``); ``"per-run"``, R calls per layer, each
on its run's slice of the channels, the outputs concatenated; ``"auto"``, run by run on the
CPU (oneDNN's grouped convolutions and transposed convolutions take slow paths there:
docs/training.md, "Packed runs") and grouped elsewhere. The same arithmetic either way, to
float rounding."""


class _PackedConvolution(nn.Module):
    """R convolutions of one shape: parameters ``weight [R, *layer.weight.shape]``, ``bias
    [R, out]``; computed grouped or run by run (:data:`PACKED_CONVS`)."""

    convs: PackedConvs = "auto"

    def __init__(self, runs: int, layer: nn.Conv2d | nn.ConvTranspose2d) -> None:
        super().__init__()
        self.runs = runs
        self.weight = nn.Parameter(torch.empty(runs, *layer.weight.shape))
        self.bias = nn.Parameter(torch.empty(runs, layer.out_channels))

    def _call(self, x: Tensor, weight: Tensor, bias: Tensor, groups: int) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        if self.convs == "per-run" or (self.convs == "auto" and x.device.type == "cpu"):
            return self.per_run(x)
        return self.grouped(x)

    def per_run(self, x: Tensor) -> Tensor:
        """The R convolutions one after the other, on each run's slice of the channels."""
        parts = x.chunk(self.runs, dim=1)
        outputs = [
            self._call(part, w, b, 1)
            for part, w, b in zip(parts, self.weight, self.bias, strict=True)
        ]
        return torch.cat(outputs, dim=1)

    def grouped(self, x: Tensor) -> Tensor:
        """The R convolutions as one grouped call."""
        weight = self.weight.reshape(-1, *self.weight.shape[2:])
        return self._call(x, weight, self.bias.reshape(-1), self.runs)


class PackedConv2d(_PackedConvolution):
    """R convolutions as one: ``[B, R * in, H, W] -> [B, R * out, H', W']``.

    Parameters ``weight [R, out, in, k, k]``, ``bias [R, out]``.
    """

    def __init__(self, runs: int, layer: nn.Conv2d) -> None:
        super().__init__(runs, layer)
        self.stride, self.padding = layer.stride, layer.padding

    def _call(self, x: Tensor, weight: Tensor, bias: Tensor, groups: int) -> Tensor:
        return F.conv2d(x, weight, bias, self.stride, self.padding, groups=groups)


class PackedConvTranspose2d(_PackedConvolution):
    """R transposed convolutions as one: ``[B, R * in, h, w] -> [B, R * out, ...]``.

    Parameters ``weight [R, in, out, k, k]``, ``bias [R, out]``.
    """

    def __init__(self, runs: int, layer: nn.ConvTranspose2d) -> None:
        super().__init__(runs, layer)
        # torch types the padding of every convolution as ``str | tuple``; a transposed one
        # takes no string padding.
        self.stride, self.padding = layer.stride, cast("tuple[int, ...]", layer.padding)
        self.output_padding = layer.output_padding

    def _call(self, x: Tensor, weight: Tensor, bias: Tensor, groups: int) -> Tensor:
        return F.conv_transpose2d(
            x, weight, bias, self.stride, self.padding, self.output_padding, groups=groups
        )


def set_packed_convs(module: nn.Module, convs: PackedConvs) -> None:
    """Compute every packed convolution of ``module`` (a packed policy or critic) the way
    ``convs`` says (:data:`PACKED_CONVS`). Set it before the module is compiled or its step
    captured as a CUDA graph: a captured graph replays the way it was captured with.

    Raises:
        ValueError: an unknown way.
    """
    if convs not in PACKED_CONVS:
        raise ValueError(f"packed convs must be one of {', '.join(PACKED_CONVS)}, got {convs!r}")
    for layer in module.modules():
        if isinstance(layer, _PackedConvolution):
            layer.convs = convs


class PackedBatchNorm1d(nn.Module):
    """R BatchNorm1d layers: each run's features normalised over that run's samples only.

    ``[R, B, F] -> [R, B, F]``. Parameters ``weight``, ``bias`` and buffers ``running_mean``,
    ``running_var`` ``[R, F]``, ``num_batches_tracked [R]``; the statistics, momentum and
    epsilon are ``nn.BatchNorm1d``'s.
    """

    running_mean: Tensor
    running_var: Tensor
    num_batches_tracked: Tensor

    def __init__(self, runs: int, layer: nn.BatchNorm1d) -> None:
        super().__init__()
        features = layer.num_features
        self.eps, self.momentum = layer.eps, layer.momentum
        self.weight = nn.Parameter(torch.empty(runs, features))
        self.bias = nn.Parameter(torch.empty(runs, features))
        self.register_buffer("running_mean", torch.zeros(runs, features))
        self.register_buffer("running_var", torch.ones(runs, features))
        self.register_buffer("num_batches_tracked", torch.zeros(runs, dtype=torch.long))

    def forward(self, x: Tensor) -> Tensor:
        R, B, features = x.shape
        if self.training:
            self.num_batches_tracked.add_(1)
        flat = x.transpose(0, 1).reshape(B, R * features)
        out = F.batch_norm(
            flat,
            self.running_mean.view(-1),
            self.running_var.view(-1),
            self.weight.reshape(-1),
            self.bias.reshape(-1),
            self.training,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return out.view(B, R, features).transpose(0, 1)


class PackedLSTM(nn.Module):
    """R one-layer LSTMs advanced one step: ``x [R, B, in]``, ``(h, c) [R, B, H]`` -> ``(h, c)``.

    Gates ``x W_ih^T + b_ih + h W_hh^T + b_hh`` in ``nn.LSTM``'s order (input, forget, cell,
    output); parameters named and shaped as ``nn.LSTM``'s (``weight_ih_l0 [R, 4H, in]``, ...).
    Under autocast the state is in its lower precision, as ``nn.LSTM``'s is where oneDNN or
    cuDNN runs it (PyTorch's builds, by default; with oneDNN disabled, a CPU ``nn.LSTM``
    keeps a float32 state under autocast and a pack does not follow it).
    """

    def __init__(self, runs: int, layer: nn.LSTM) -> None:
        super().__init__()
        if layer.num_layers != 1 or layer.bidirectional or not layer.bias or layer.batch_first:
            raise ValueError("only a one-layer, one-directional LSTM with biases can be packed")
        H, inputs = layer.hidden_size, layer.input_size
        self.hidden_size = H
        self.weight_ih_l0 = nn.Parameter(torch.empty(runs, 4 * H, inputs))
        self.weight_hh_l0 = nn.Parameter(torch.empty(runs, 4 * H, H))
        self.bias_ih_l0 = nn.Parameter(torch.empty(runs, 4 * H))
        self.bias_hh_l0 = nn.Parameter(torch.empty(runs, 4 * H))

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        # A run alone's nn.LSTM keeps its state in autocast's precision: so does the pack
        # (a float32 c would otherwise promote every step's cell update).
        h, c = autocast_state(state, x.device)
        gates = torch.baddbmm(
            self.bias_ih_l0.unsqueeze(1), x, self.weight_ih_l0.transpose(1, 2)
        ) + torch.baddbmm(self.bias_hh_l0.unsqueeze(1), h, self.weight_hh_l0.transpose(1, 2))
        i, f, g, o = gates.chunk(4, dim=2)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class PackedFlatten(nn.Module):
    """``[B, R * C, h, w] -> [R, B, C * h * w]``: from the convolutions' layout to vectors."""

    def __init__(self, runs: int) -> None:
        super().__init__()
        self.runs = runs

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], self.runs, -1).transpose(0, 1)


class PackedUnflatten(nn.Module):
    """``[R, B, C * s * s] -> [B, R * C, s, s]``: from vectors to the convolutions' layout."""

    def __init__(self, runs: int, layer: nn.Unflatten) -> None:
        super().__init__()
        self.runs = runs
        self.shape = tuple(layer.unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        channels, *side = self.shape
        return x.transpose(0, 1).reshape(x.shape[1], self.runs * channels, *side)


class PackedGroupViews(nn.Module):
    """``[R, B * V, F] -> [R, B, V * F]`` (:class:`~pyskick.models.critics.GroupViews`)."""

    def __init__(self, layer: GroupViews) -> None:
        super().__init__()
        self.n_views = layer.n_views

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1, self.n_views * x.shape[2])


# Layers without parameters that act on every element or channel alike: the packed layouts
# pass through them unchanged.
_SHARED = (nn.ReLU, nn.LeakyReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Identity)


def _pack_layer(layer: nn.Module, runs: int) -> nn.Module:
    """The packed counterpart of one layer, parameters uninitialised (:func:`pack` fills them)."""
    if isinstance(layer, nn.Linear):
        return PackedLinear(runs, layer.in_features, layer.out_features)
    if isinstance(layer, nn.Conv2d):
        return PackedConv2d(runs, layer)
    if isinstance(layer, nn.ConvTranspose2d):
        return PackedConvTranspose2d(runs, layer)
    if isinstance(layer, nn.BatchNorm1d):
        return PackedBatchNorm1d(runs, layer)
    if isinstance(layer, nn.LSTM):
        return PackedLSTM(runs, layer)
    if isinstance(layer, nn.Flatten):
        return PackedFlatten(runs)
    if isinstance(layer, nn.Unflatten):
        return PackedUnflatten(runs, layer)
    if isinstance(layer, GroupViews):
        return PackedGroupViews(layer)
    if isinstance(layer, _SHARED):
        return copy.deepcopy(layer)
    if isinstance(layer, nn.Sequential):
        return nn.Sequential(*(_pack_layer(child, runs) for child in layer))
    raise TypeError(f"cannot pack a {type(layer).__name__}: no packed counterpart")


# --------------------------------------------------------------------------- the policy
class PackedCompletionPolicy(FreezableSenseAndFuse):
    """R :class:`~pyskick.models.CompletionPolicy` networks of one config, as one module.

    Called like ``CompletionPolicy`` on ``B * R`` episodes (episode ``b * R + r`` is run r's),
    it returns what R separate policies would, up to floating-point rounding. Build it with
    :func:`pack`.

    Args:
        config: the runs' (shared) architecture.
        runs: R.
    """

    BATCHNORMS = (nn.modules.batchnorm._BatchNorm, PackedBatchNorm1d)
    sense_im: nn.Module
    sense_pro: nn.Module
    fuse: nn.Module
    aggregate: PackedLSTM
    act: nn.Module
    decode: nn.Module

    def __init__(self, config: ModelConfig, runs: int) -> None:
        super().__init__()
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ValueError(f"runs must be a positive int, got {runs!r}")
        self.config = config
        self.runs = runs
        with torch.random.fork_rng(devices=[]):  # the template's init draws are discarded
            template = CompletionPolicy(config)
        for name in ("sense_im", "sense_pro", "fuse", "aggregate", "act", "decode"):
            self.add_module(name, _pack_layer(template.get_submodule(name), runs))
        self.grid_shape = template.decode.grid_shape
        self._frozen: tuple[str, ...] = ()
        self._frozen_batchnorm: FrozenBatchNorm = "train"

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> tuple[Tensor, Tensor]:
        """Zero ``(h, c)``, each ``[R, B, hidden]``, for ``batch_size = B * R`` episodes."""
        weight = self.aggregate.weight_hh_l0
        shape = (self.runs, batch_size // self.runs, self.config.hidden_size)
        device = weight.device if device is None else device
        return (
            torch.zeros(shape, dtype=weight.dtype, device=device),
            torch.zeros(shape, dtype=weight.dtype, device=device),
        )

    def forward(
        self,
        view: Tensor,
        proprio: Tensor,
        time: int | Tensor,
        state: tuple[Tensor, Tensor] | None = None,
        *,
        azimuth: Tensor | None = None,
        decode: bool = True,
        earlier_hidden: Tensor | None = None,
    ) -> StepOutput:
        """One glimpse of ``B * R`` episodes (arguments and outputs as
        :meth:`CompletionPolicy.step`, the state ``[R, B, hidden]``; ``earlier_hidden`` is
        ``[k, R, B, hidden]``, the earlier glimpses' ``state[0]``)."""
        cfg, R = self.config, self.runs
        view = check_float_tensor("view", view, (None, cfg.channels, cfg.view_size, cfg.view_size))
        episodes = view.shape[0]
        if episodes % R:
            raise ValueError(f"a pack of {R} runs needs B * {R} episodes, got {episodes}")
        B = episodes // R
        proprio = check_float_tensor("proprio", proprio, (episodes, cfg.proprio_size))
        h, c = self.initial_state(episodes, view.device) if state is None else state
        image = self.sense_im(view.reshape(B, R * cfg.channels, cfg.view_size, cfg.view_size))
        fused = self.fuse(torch.cat([image, self.sense_pro(runs_first(proprio, R))], dim=2))
        h, c = self.aggregate(fused, (h, c))
        hidden = episodes_first(h)
        inputs = act_input(cfg, hidden, proprio, time, azimuth)
        logits = episodes_first(self.act(runs_first(inputs, R)))
        if not decode:
            if earlier_hidden is not None:
                raise ValueError("earlier_hidden is decoded with this glimpse: it needs decode")
            decoded = None
        elif earlier_hidden is None:
            decoded = self._decode(h, B)
        else:
            earlier = check_float_tensor(
                "earlier_hidden", earlier_hidden, (None, R, B, cfg.hidden_size)
            )
            decoded = self._decode_glimpses(torch.cat([earlier, h[None]]))
        return StepOutput(logits, decoded, (h, c), hidden)

    def step(self, *args: Any, **kwargs: Any) -> StepOutput:
        """:meth:`forward` through the module call (hooks see it)."""
        return self(*args, **kwargs)

    def _decode(self, h: Tensor, B: int) -> Tensor:
        """``[R, B, hidden] -> [B * R, N, M, C, H, W]`` (the last layer's output, no copy)."""
        maps = self.decode(F.normalize(h, p=1, dim=2, eps=L1_EPS))
        return maps.reshape(B * self.runs, *self.grid_shape)

    def _decode_glimpses(self, h: Tensor) -> Tensor:
        """``[T, R, B, hidden] -> [T, B * R, N, M, C, H, W]``: T glimpses in one batch, each
        glimpse's BatchNorm statistics its own (:func:`glimpse_batch_norm`)."""
        T, R, B, features = h.shape
        decoder = cast(nn.Sequential, self.decode)
        x = glimpse_batch_norm(decoder[0], F.normalize(h, p=1, dim=3, eps=L1_EPS))
        # Each run's T * B samples, glimpse-major: the decoder's rows are then (t, b), its
        # channels run-major, so its output is [T, B, R, ...], episode b * R + r of glimpse t.
        maps: Tensor = decoder[1:](x.transpose(0, 1).reshape(R, T * B, features))
        return maps.reshape(T, B * R, *self.grid_shape)


# ------------------------------------------------------------------------------ critics
class PackedPartialObservabilityCritic(nn.Module):
    """R :class:`~pyskick.models.PartialObservabilityCritic` value heads as one."""

    full_observability = False

    def __init__(self, config: ModelConfig, runs: int) -> None:
        super().__init__()
        self.config, self.runs = config, runs
        with torch.random.fork_rng(devices=[]):
            template = PartialObservabilityCritic(config)
        self.critic = _pack_layer(template.critic, runs)

    def forward(
        self, hidden: Tensor, proprio: Tensor, time: int | Tensor, *, azimuth: Tensor | None = None
    ) -> Tensor:
        """Value ``[B * R]`` of each episode's current step (arguments as the solo critic's)."""
        inputs = act_input(self.config, hidden, proprio, time, azimuth)
        return episodes_first(self.critic(runs_first(inputs, self.runs))).squeeze(1)


class PackedFullObservabilityCritic(nn.Module):
    """R :class:`~pyskick.models.FullObservabilityCritic` value heads as one, sharing the
    packed policy's image encoder (not a submodule, as in the solo critic)."""

    full_observability = True
    image_encoder: nn.Module

    def __init__(self, config: ModelConfig, runs: int, image_encoder: nn.Module) -> None:
        super().__init__()
        self.config, self.runs = config, runs
        with torch.random.fork_rng(devices=[]):
            template = FullObservabilityCritic(config, nn.Identity())
        self.critic_fuse = _pack_layer(template.critic_fuse, runs)
        self.critic = _pack_layer(template.critic, runs)
        object.__setattr__(self, "image_encoder", image_encoder)

    def encode_views(self, grid: Tensor) -> Tensor:
        """``[B * R, N, M, C, H, W]`` absolute grids -> their views through the shared image
        encoder, ``[R, B * V, sense_size]`` (as the solo critic's :meth:`encode_views`: once
        per episode)."""
        cfg, R = self.config, self.runs
        V, C, S = cfg.n_views, cfg.channels, cfg.view_size
        B = grid.shape[0] // R
        views = grid.reshape(B, R, V, C, S, S).transpose(1, 2).reshape(B * V, R * C, S, S)
        return cast(Tensor, self.image_encoder(views))

    def encode_grid(self, grid: Tensor) -> Tensor:
        """``[B * R, N, M, C, H, W]`` absolute grids -> ``[R, B, grid_size]``."""
        return cast(Tensor, self.critic_fuse(self.encode_views(grid)))

    def forward(
        self,
        hidden: Tensor,
        proprio: Tensor,
        time: int | Tensor,
        grid: Tensor,
        *,
        azimuth: Tensor | None = None,
        views: Tensor | None = None,
    ) -> Tensor:
        """Value ``[B * R]`` of each episode's current step (arguments as the solo critic's;
        ``views`` ``[R, B * V, sense_size]``)."""
        parts = full_critic_inputs(self.config, hidden, proprio, time, azimuth)
        if views is None:
            encoded = self.encode_grid(grid)
        else:
            cfg = self.config
            check_float_tensor("grid", grid, (hidden.shape[0], *cfg.grid_shape))
            B = hidden.shape[0] // self.runs
            check_float_tensor("views", views, (self.runs, B * cfg.n_views, cfg.sense_size))
            encoded = cast(Tensor, self.critic_fuse(views))
        inputs = torch.cat([runs_first(parts, self.runs), encoded], dim=2)
        return episodes_first(self.critic(inputs)).squeeze(1)


# ----------------------------------------------------------------------- pack, unpack
def pack_state(states: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Stack R state dicts of one architecture along a new leading run dimension."""
    keys = list(states[0])
    for i, state in enumerate(states[1:], start=1):
        if list(state) != keys:
            raise ValueError(f"run {i} has other parameters than run 0: not one architecture")
    return {key: torch.stack([state[key] for state in states]) for key in keys}


def unpack_state(state: dict[str, Tensor], run: int) -> dict[str, Tensor]:
    """Run ``run``'s state dict out of a packed one (copies)."""
    return {key: value[run].clone() for key, value in state.items()}


@overload
def pack(
    modules: Sequence[CompletionPolicy], image_encoder: None = None
) -> PackedCompletionPolicy: ...


@overload
def pack(modules: Sequence[nn.Module], image_encoder: nn.Module | None = None) -> nn.Module: ...


def pack(modules: Sequence[nn.Module], image_encoder: nn.Module | None = None) -> nn.Module:
    """R solo modules of one config as one packed module (their weights and BatchNorm
    statistics, copied; the first one's train/eval mode and freezing).

    Args:
        modules: R :class:`CompletionPolicy`, or R partial- or full-observability critics.
        image_encoder: the packed policy's ``sense_im``, for full-observability critics.

    Raises:
        ValueError: no modules, different configs or kinds.
        TypeError: a module of no packable kind.
    """
    if not modules:
        raise ValueError("pack needs at least one module")
    first = modules[0]
    packable = (CompletionPolicy, PartialObservabilityCritic, FullObservabilityCritic)
    if not isinstance(first, packable):
        raise TypeError(f"cannot pack a {type(first).__name__}")
    kinds = {type(m) for m in modules}
    configs = {getattr(m, "config", None) for m in modules}
    if len(kinds) > 1 or len(configs) > 1:
        raise ValueError("pack needs modules of one kind and one config")
    runs = len(modules)
    packed: nn.Module
    if isinstance(first, CompletionPolicy):
        frozen = {m.frozen_modules for m in modules}
        if len(frozen) > 1:
            raise ValueError("pack needs policies with the same frozen modules")
        packed = PackedCompletionPolicy(first.config, runs)
        packed._frozen, packed._frozen_batchnorm = first._frozen, first._frozen_batchnorm
    elif isinstance(first, PartialObservabilityCritic):
        packed = PackedPartialObservabilityCritic(first.config, runs)
    else:
        if image_encoder is None:
            raise ValueError("packing full-observability critics needs the packed image encoder")
        packed = PackedFullObservabilityCritic(first.config, runs, image_encoder)
    packed.load_state_dict(pack_state([m.state_dict() for m in modules]))
    device = next(first.parameters()).device
    packed.to(device)
    for packed_param, param in zip(packed.parameters(), first.parameters(), strict=True):
        packed_param.requires_grad_(param.requires_grad)
    packed.train(first.training)
    return packed


def unpack_into(packed: nn.Module, modules: Sequence[nn.Module]) -> None:
    """Copy each run's weights and statistics from ``packed`` into its solo module, in place
    (exact)."""
    state = packed.state_dict()
    if len(modules) != _runs(packed):
        raise ValueError(f"the pack holds {_runs(packed)} runs, got {len(modules)} modules")
    with torch.no_grad():
        for r, module in enumerate(modules):
            for key, value in module.state_dict().items():
                value.copy_(state[key][r])


def unpack(packed: nn.Module) -> list[nn.Module]:
    """New solo modules, one per run, holding the packed weights (exact; the pack's mode and,
    for policies, freezing).

    Raises:
        TypeError: not a packed module.
    """
    runs = _runs(packed)
    device = next(packed.parameters()).device
    out: list[nn.Module] = []
    for r in range(runs):
        with torch.random.fork_rng(devices=[]):
            module: nn.Module
            if isinstance(packed, PackedCompletionPolicy):
                module = CompletionPolicy(packed.config)
                if packed.frozen_modules:
                    module.freeze_sense_and_fuse(
                        include_decode="decode" in packed.frozen_modules,
                        batchnorm=packed._frozen_batchnorm,
                    )
            elif isinstance(packed, PackedPartialObservabilityCritic):
                module = PartialObservabilityCritic(packed.config)
            elif isinstance(packed, PackedFullObservabilityCritic):
                module = FullObservabilityCritic(packed.config, nn.Identity())
            else:
                raise TypeError(f"cannot unpack a {type(packed).__name__}")
        module.load_state_dict(unpack_state(packed.state_dict(), r))
        out.append(module.to(device).train(packed.training))
    return out


def _runs(packed: nn.Module) -> int:
    runs = getattr(packed, "runs", None)
    if not isinstance(runs, int):
        raise TypeError(f"{type(packed).__name__} is not a packed module")
    return runs
