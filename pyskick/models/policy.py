"""The completion agent: Sense -> Fuse -> Aggregate -> (Decode, Act).

The authors' network is in docs/paper-reference.md §3.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, cast

import torch
from torch import Tensor, nn

from pyskick.models.act import ActHead
from pyskick.models.config import ModelConfig
from pyskick.models.decode import ViewgridDecoder
from pyskick.models.fuse import Fuse
from pyskick.models.init import init_weights_
from pyskick.models.inputs import act_input, check_float_tensor
from pyskick.models.sense import ImageEncoder, ProprioEncoder

LSTMState = tuple[Tensor, Tensor]
"""The aggregator's recurrent state (h, c), each ``[B, hidden_size]``."""

FrozenBatchNorm = Literal["train", "eval"]
"""How frozen modules' BatchNorm layers behave while the policy is in train mode."""

_FROZEN_BATCHNORM = ("train", "eval")


def autocast_state(state: LSTMState, device: torch.device) -> LSTMState:
    """``(h, c)`` in autocast's lower precision when autocast is on for ``device`` (as
    ``nn.LSTM`` keeps its state where oneDNN or cuDNN runs it), else unchanged."""
    if not torch.is_autocast_enabled(device.type):
        return state
    dtype = torch.get_autocast_dtype(device.type)
    return state[0].to(dtype), state[1].to(dtype)


def lstm_cell(lstm: nn.LSTM, x: Tensor, state: LSTMState) -> LSTMState:
    """One step of a one-layer ``lstm``, as ``nn.LSTM`` computes it, in plain operations.

    Args:
        lstm: a one-layer, unidirectional ``nn.LSTM`` with biases.
        x: ``[B, input_size]``.
        state: (h, c), each ``[B, hidden_size]``.

    Returns:
        The new (h, c), each ``[B, hidden_size]``; under autocast in its lower precision, as
        ``nn.LSTM``'s (autocast runs the LSTM in it, state included).
    """
    state = autocast_state(state, x.device)
    # nn.LSTM registers its parameters by name: torch's types do not declare them.
    w_ih, w_hh, b_ih, b_hh = (
        cast(Tensor, getattr(lstm, name))
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
    )
    gates = nn.functional.linear(x, w_ih, b_ih) + nn.functional.linear(state[0], w_hh, b_hh)
    i, f, g, o = gates.chunk(4, dim=1)  # nn.LSTM's order: input, forget, cell, output
    c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


class StepOutput(NamedTuple):
    """What one step of :class:`CompletionPolicy` returns."""

    logits: Tensor
    """``[B, A]`` unnormalised action scores."""
    decoded: Tensor | None
    """``[B, N, M, C, H, W]`` reconstructed viewgrid, start-relative azimuth frame (None when
    the step was asked not to decode; ``[k + 1, B, ...]``, the earlier glimpses' too, when it
    was given their hidden states)."""
    state: LSTMState
    """New recurrent state (h, c), each ``[B, hidden_size]``; feed it to the next step."""
    hidden: Tensor
    """``[B, hidden_size]`` new hidden state h (the same tensor as ``state[0]``)."""

    @property
    def probs(self) -> Tensor:
        """``[B, A]`` action probabilities, ``softmax(logits)``."""
        return torch.softmax(self.logits, dim=1)


class FreezableSenseAndFuse(nn.Module):
    """Freezing of Sense and Fuse, shared by :class:`CompletionPolicy` and its packed form
    (:class:`~pyskick.models.packed.PackedCompletionPolicy`): the subclass names its
    BatchNorm layer types in :attr:`BATCHNORMS` and sets ``_frozen = ()`` and
    ``_frozen_batchnorm = "train"`` in its constructor."""

    BATCHNORMS: tuple[type[nn.Module], ...] = (nn.modules.batchnorm._BatchNorm,)
    _frozen: tuple[str, ...]
    _frozen_batchnorm: FrozenBatchNorm

    def freeze_sense_and_fuse(
        self, *, include_decode: bool = False, batchnorm: FrozenBatchNorm = "train"
    ) -> None:
        """Stop training ``sense_im``, ``sense_pro`` and ``fuse`` (training_setting 1).

        Sets ``requires_grad=False`` on their parameters (and on ``decode``'s with
        ``include_decode``, the authors' ``--fix_decode``). The authors leave the policy in
        train mode, so the frozen ``fuse`` BatchNorm keeps normalising with batch statistics
        and updating its running mean and variance: that is ``batchnorm="train"``, the
        default. ``batchnorm="eval"`` keeps the frozen modules' BatchNorm layers in eval mode
        (running statistics used and fixed) even after ``policy.train()``.

        Args:
            include_decode: freeze ``decode`` too.
            batchnorm: ``"train"`` (paper behaviour) or ``"eval"``.

        Raises:
            ValueError: on another ``batchnorm`` value.
        """
        if batchnorm not in _FROZEN_BATCHNORM:
            raise ValueError(f"batchnorm must be 'train' or 'eval', got {batchnorm!r}")
        names = ("sense_im", "sense_pro", "fuse", *(("decode",) if include_decode else ()))
        for name in names:
            self.get_submodule(name).requires_grad_(False)
        self._frozen = names
        self._frozen_batchnorm = batchnorm
        self.train(self.training)

    @property
    def frozen_modules(self) -> tuple[str, ...]:
        """Names of the submodules frozen by :meth:`freeze_sense_and_fuse` (empty if none)."""
        return self._frozen

    def train(self, mode: bool = True) -> FreezableSenseAndFuse:
        """Set train/eval mode; frozen BatchNorm layers stay in eval mode if so requested."""
        super().train(mode)
        if mode and self._frozen_batchnorm == "eval":
            for name in self._frozen:
                for layer in self.get_submodule(name).modules():
                    if isinstance(layer, self.BATCHNORMS):
                        layer.eval()
        return self

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters that still require gradients (what the optimiser should cover)."""
        return [p for p in self.parameters() if p.requires_grad]


class CompletionPolicy(FreezableSenseAndFuse):
    """The look-around agent of the paper (the authors' ``Policy`` with ``actorType='actor'``).

    Each step encodes the current view (``sense_im``) and proprioception (``sense_pro``), fuses
    them (``fuse``), advances a one-layer LSTM (``aggregate``) one step, then decodes the whole
    viewgrid from the L1-normalised hidden state h (``decode``) and scores the next motion from
    h and side inputs (``act``). Only h feeds the heads, never the cell state.

    The class is the same at every episode length, so a one-view (T=1) state dict loads into
    the T=4 model with ``strict=True``; submodule names, layer indices and parameter shapes are
    those of the authors' ``Policy``. Critics are separate modules
    (:mod:`pyskick.models.critics`). Weights are initialised with ``config.init`` everywhere
    except ``sense_pro``, which keeps PyTorch's default init as in the authors' code.

    Args:
        config: the architecture; see :class:`ModelConfig` and :func:`preset`.
    """

    sense_im: ImageEncoder
    sense_pro: ProprioEncoder
    fuse: Fuse
    aggregate: nn.LSTM
    act: ActHead
    decode: ViewgridDecoder

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        self.config = config
        self.sense_im = ImageEncoder(config)
        self.sense_pro = ProprioEncoder(config)
        self.fuse = Fuse(config)
        self.aggregate = nn.LSTM(config.fuse_size, config.hidden_size, num_layers=1)
        self.act = ActHead(config)
        self.decode = ViewgridDecoder(config)
        for module in (self.sense_im, self.fuse, self.aggregate, self.act, self.decode):
            init_weights_(module, config.init)
        self._frozen: tuple[str, ...] = ()
        self._frozen_batchnorm: FrozenBatchNorm = "train"

    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> LSTMState:
        """Zero (h, c) for the start of an episode, each ``[B, hidden_size]``.

        Args:
            batch_size: B.
            device: where to allocate; defaults to the device of the parameters.
        """
        # nn.LSTM registers its parameters by name: torch's types do not declare them.
        weight = cast(Tensor, self.aggregate.weight_hh_l0)
        shape = (batch_size, self.config.hidden_size)
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
        state: LSTMState | None = None,
        *,
        azimuth: Tensor | None = None,
        decode: bool = True,
        earlier_hidden: Tensor | None = None,
    ) -> StepOutput:
        """One glimpse: sense, fuse, aggregate, then decode and act. See :meth:`step`."""
        cfg = self.config
        view = check_float_tensor("view", view, (None, cfg.channels, cfg.view_size, cfg.view_size))
        batch_size = view.shape[0]
        proprio = check_float_tensor("proprio", proprio, (batch_size, cfg.proprio_size))
        if state is None:
            state = self.initial_state(batch_size, view.device)
        h, c = (
            check_float_tensor(name, tensor, (batch_size, cfg.hidden_size))
            for name, tensor in zip(("state h", "state c"), state, strict=True)
        )
        hidden, cell = self.memory(view, proprio, (h, c))
        logits = self.act_logits(hidden, proprio, time, azimuth=azimuth)
        if not decode:
            if earlier_hidden is not None:
                raise ValueError("earlier_hidden is decoded with this glimpse: it needs decode")
            decoded = None
        elif earlier_hidden is None:
            decoded = self.decode(hidden)
        else:
            earlier = check_float_tensor(
                "earlier_hidden", earlier_hidden, (None, batch_size, cfg.hidden_size)
            )
            glimpses = torch.cat([earlier, hidden[None]])
            decoded = self.decode.decode_glimpses(glimpses)
        return StepOutput(logits, decoded, (hidden, cell), hidden)

    def step(
        self,
        view: Tensor,
        proprio: Tensor,
        time: int | Tensor,
        state: LSTMState | None = None,
        *,
        azimuth: Tensor | None = None,
        decode: bool = True,
        earlier_hidden: Tensor | None = None,
    ) -> StepOutput:
        """One glimpse of the episode (calls the module, so hooks and DDP see it).

        Args:
            view: ``[B, C, H, W]`` current view, normalised as the environment delivers it.
            proprio: ``[B, P]`` commanded (d_elev, d_azim), absolute elevation index, and the
                absolute azimuth index when ``known_azimuth``; raw integer values as floats.
            time: step index t (0..T-1), an int or ``[B]``.
            state: (h, c) from the previous step; None (or :meth:`initial_state`) at t = 0.
            azimuth: ``[B]`` absolute azimuth index; needed only when ``act_on_azimuth`` and
                not ``known_azimuth``.
            decode: False skips the decoder (the most expensive part): ``decoded`` is None.
                Evaluation needs only the last glimpse's reconstruction.
            earlier_hidden: ``[k, B, hidden_size]`` hidden states of the episode's earlier
                glimpses (their ``hidden``), decoded in one batch with this glimpse's: then
                ``decoded`` is ``[k + 1, B, N, M, C, H, W]``, what k + 1 steps would have
                decoded (:meth:`ViewgridDecoder.decode_glimpses`). One large batch is fewer
                and larger kernels than k + 1 small ones (``TrainConfig.decode_once``).

        Returns:
            :class:`StepOutput` (logits, decoded, state, hidden).

        Raises:
            TypeError: if an input is not a floating-point tensor.
            ValueError: if an input has the wrong shape.
        """
        return self(
            view,
            proprio,
            time,
            state,
            azimuth=azimuth,
            decode=decode,
            earlier_hidden=earlier_hidden,
        )

    def memory(self, view: Tensor, proprio: Tensor, state: LSTMState) -> LSTMState:
        """Sense -> Fuse -> Aggregate of one glimpse: the new (h, c), without Act and Decode
        (what a caller that needs only the agent's memory runs; :meth:`forward` starts with
        it). Inputs are not checked here (:meth:`step` checks them).

        Args:
            view: ``[B, C, H, W]`` current view.
            proprio: ``[B, P]`` proprioception.
            state: (h, c) from the previous glimpse, each ``[B, hidden_size]``.

        Returns:
            (h, c), each ``[B, hidden_size]``.
        """
        fused = self.fuse(torch.cat([self.sense_im(view), self.sense_pro(proprio)], dim=1))
        if torch.compiler.is_compiling():
            # torch.compile does not trace nn.LSTM (a graph break; inductor cannot lower
            # oneDNN's LSTM): the same cell written out, which it fuses.
            return lstm_cell(self.aggregate, fused, state)
        # nn.LSTM wants [seq=1, B, F] and a [layers=1, B, H] state. squeeze(0), not [0]: the
        # same values, and its backward is a view where an index's fills zeros and copies.
        _, (h, c) = self.aggregate(fused.unsqueeze(0), (state[0][None], state[1][None]))
        return h.squeeze(0), c.squeeze(0)

    def act_logits(
        self,
        hidden: Tensor,
        proprio: Tensor,
        time: int | Tensor,
        *,
        azimuth: Tensor | None = None,
    ) -> Tensor:
        """Action logits ``[B, A]`` from a hidden state ``[B, hidden_size]`` and side inputs.

        Usable on its own, e.g. on a perturbed hidden state for the policy visualisation.
        Arguments as in :meth:`step`.
        """
        return self.act(act_input(self.config, hidden, proprio, time, azimuth))
