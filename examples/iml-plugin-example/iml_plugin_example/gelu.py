"""A one-hidden-layer network with GELU units, registered in ``iml`` as the model ``"gelu_mlp"``
when imported: ``iml sweep --config.model.name=gelu_mlp --config.model.hidden=16``.

A model of ``iml`` is a Flax module called as ``model.apply(variables, x, train=...)`` on a
batch of rows ``x [B, d]`` (images ``[B, H, W, C]`` are taken as rows of their pixels here),
returning one logit per row ``[B]`` for a binary loss and ``[B, n]`` for an ``n``-class one.
"""

from flax import linen as nn

from iml.models import register_model

__all__ = ["GeluMLP"]


class GeluMLP(nn.Module):
    """``Dense(hidden) -> GELU -> Dense(n_outputs)``."""

    n_outputs: int = 1
    hidden: int = 16

    @nn.compact
    def __call__(self, x, train: bool = False):
        h = nn.gelu(nn.Dense(self.hidden)(x.reshape(x.shape[0], -1)))
        out = nn.Dense(self.n_outputs)(h)
        return out[..., 0] if self.n_outputs == 1 else out


register_model(
    "gelu_mlp",
    lambda n_outputs, hidden=16: GeluMLP(n_outputs, hidden),
    inputs=("rows", "images"),
    options=("hidden",),
)
